"""flake8 and ascend-analyse read the same configuration and report the same findings.

One small project is linted by both front ends under every configuration form
(setup.cfg, tox.ini, .flake8, pyproject.toml, the command line), with
``# noqa`` comments, per-file ignores, excluded folders and torch_npu version choices; the
findings (path, line, column, code, message) must be identical.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flake8_ascend import cli

TRAIN = """\
import torch
from torch.utils.data import DataLoader

model = torch.nn.Linear(4, 4).cuda()
torch.cuda.synchronize()  # noqa: ASC201
x = torch.zeros(3).cuda()  # noqa:ASC202
y = torch.ones(2).to(
    "cuda")  # NOQA
z = torch.ones(2).cuda()  # noqa: ASC201,ASC203
d = torch.bitwise_right_shift(a, b)  # a kernel from torch_npu 2.7.1 on
loader = DataLoader(data, batch_size=8)
for images in loader:
    images = images.to("cuda")
    loss = model(images).sum()
    loss.backward()
    print(loss.item())
name = torch.cuda.get_device_name(\"\"\"0
\"\"\")  # noqa: ASC201  (covers the whole string, as in flake8)
"""
HELPER = """\
import torch
torch.cuda.synchronize()
t = torch.zeros(2).cuda()  # noqa
d = torch.bitwise_right_shift(a, b)  # a kernel from torch_npu 2.7.1 on
"""
# flake8 [flake8] section settings shared by setup.cfg, tox.ini and .flake8
SECTION = """\
[flake8]
ascend-torch-version = 2.6.0
extend-ignore = ASC504
extend-exclude = vendored
per-file-ignores =
    train_gpu.py: ASC5
    tools/*.py: ASC201
"""
LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<code>ASC\d{3}) (?P<message>.*)$")


def _project(root: Path) -> Path:
    (root / "tools").mkdir(parents=True)
    (root / "train_gpu.py").write_text(TRAIN, encoding="utf-8")
    (root / "tools" / "helper.py").write_text(HELPER, encoding="utf-8")
    (root / "vendored" / "lib").mkdir(parents=True)
    (root / "vendored" / "lib" / "ops.py").write_text(HELPER, encoding="utf-8")
    return root


def _flake8(root: Path, *args: str):
    result = subprocess.run([sys.executable, "-m", "flake8", *args, "."], capture_output=True, text=True, cwd=root,
                            timeout=300)
    assert result.returncode in (0, 1), result.stderr
    found = set()
    for text in result.stdout.splitlines():
        match = LINE.match(text)
        if match:  # pycodestyle and pyflakes run too when the configuration does not --select
            path = match["path"][2:] if match["path"].startswith("./") else match["path"]
            found.add((path, int(match["line"]), int(match["col"]), match["code"], match["message"]))
    return found


def _analyse(root: Path, out: Path, *args: str):
    out.mkdir(exist_ok=True)
    assert cli.main(["-i", str(root), "-o", str(out), "-q", "--format", "json", *args]) == 0
    items = json.loads((out / f"{root.name}_analysis" / "findings.json").read_text(encoding="utf-8"))
    return {(i["path"], i["line"], i["column"], i["code"], i["message"]) for i in items}


SECTION_HOLDS = ({("train_gpu.py", "ASC202"), ("tools/helper.py", "ASC101")},  # (present, absent)
                 {("train_gpu.py", "ASC501"), ("train_gpu.py", "ASC504"), ("tools/helper.py", "ASC201"),
                  ("vendored/lib/ops.py", "ASC201")})
# form: (files, flake8 arguments, ascend-analyse arguments, torch_npu version, (present, absent) (path, code) pairs)
FORMS = {
    "setup.cfg": ({"setup.cfg": "[metadata]\nname = demo\n\n" + SECTION}, (), (), "2.6.0", SECTION_HOLDS),
    "tox.ini": ({"tox.ini": "[tox]\nenvlist = py3\n\n" + SECTION}, (), (), "2.6.0", SECTION_HOLDS),
    ".flake8": ({".flake8": SECTION}, (), (), "2.6.0", SECTION_HOLDS),
    # flake8 itself reads no pyproject.toml: the plugin and the CLI read [tool.flake8-ascend] for both
    "pyproject.toml": ({"pyproject.toml": '[tool.flake8-ascend]\ntorch-version = "2.6.0"\n'}, (), (), "2.6.0",
                       ({("train_gpu.py", "ASC501"), ("train_gpu.py", "ASC504"), ("tools/helper.py", "ASC201"),
                         ("vendored/lib/ops.py", "ASC201")}, set())),
    "command line": (
        {},
        ("--select=ASC1,ASC2,ASC5", "--extend-ignore=ASC504", "--per-file-ignores=train_gpu.py:ASC501",
         "--ascend-torch-version=2.6.0"),
        ("--select=ASC1,ASC2,ASC5", "--ignore=ASC504", "--per-file-ignores=train_gpu.py:ASC501", "-v", "2.6.0"),
        "2.6.0", ({("train_gpu.py", "ASC502"), ("tools/helper.py", "ASC201")},
                  {("train_gpu.py", "ASC501"), ("train_gpu.py", "ASC504")}),
    ),
    # the command line wins over the configuration file
    "file and command line": (
        {"setup.cfg": SECTION}, ("--ascend-torch-version=2.9.0", "--per-file-ignores=tools/*.py:ASC2"),
        ("-v", "2.9.0", "--per-file-ignores=tools/*.py:ASC2"), "2.9.0",
        ({("train_gpu.py", "ASC501")}, {("tools/helper.py", "ASC201"), ("train_gpu.py", "ASC101")}),
    ),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_both_front_ends_report_the_same_findings(tmp_path, monkeypatch, form):
    files, flake8_args, analyse_args, version, (present, absent) = FORMS[form]
    root = _project(tmp_path / "proj")
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(root)  # flake8 takes command-line per-file-ignores paths from here; so does ascend-analyse
    expected = _flake8(root, *flake8_args)
    assert _analyse(root, tmp_path / "out", *analyse_args) == expected
    codes = {(path, code) for path, _, _, code, _ in expected}
    assert present <= codes and not absent & codes, codes
    assert ("train_gpu.py", "ASC201") not in codes  # noqa: ASC201
    lines = {(path, line, code[:4]) for path, line, _, code, _ in expected}
    assert ("train_gpu.py", 6, "ASC2") not in lines  # noqa:ASC202
    assert ("train_gpu.py", 8, "ASC2") not in lines  # flake8 matches noqa per physical line inside brackets
    assert ("train_gpu.py", 9, "ASC2") in lines  # noqa naming other codes
    messages = [message for _, _, _, code, message in expected if code == "ASC101"]
    assert all(f"torch_npu {version}" in message for message in messages)


def test_a_malformed_configuration_file_is_a_one_line_error(tmp_path, capsys):
    root = _project(tmp_path / "proj")
    (root / "setup.cfg").write_text("[flake8\nsecret-token = abc\n", encoding="utf-8")
    (tmp_path / "out").mkdir()
    assert cli.main(["-i", str(root), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "setup.cfg: not a valid INI file (line 1)" in err and "secret" not in err
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("section", ["[flake8]\nextend-ignore = secret!\n", "[flake8]\nmax-line-length = x1\n",
                                     "[flake8]\nper-file-ignores = secret.py\n", "[flake8]\njobs = secret\n",
                                     "[flake8]\ndisable-noqa = secret\n"])
def test_a_wrong_flake8_value_is_a_one_line_error(tmp_path, capsys, section):
    root = _project(tmp_path / "proj")
    (root / ".flake8").write_text(section, encoding="utf-8")
    (tmp_path / "out").mkdir()
    assert cli.main(["-i", str(root), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "secret" not in err and "x1" not in err and "usage" not in err
    key = section.split("\n")[1].split(" = ")[0]
    assert f".flake8: [flake8] {key} has a wrong value" in err


def test_a_configuration_file_that_is_not_a_regular_file_is_refused(tmp_path, capsys):
    root = _project(tmp_path / "proj")
    (root / "tox.ini").mkdir()
    (tmp_path / "out").mkdir()
    assert cli.main(["-i", str(root), "-o", str(tmp_path / "out")]) == 2
    assert "tox.ini: not a regular file" in capsys.readouterr().err


def test_select_naming_no_code_is_a_usage_error(tmp_path, capsys):
    root = _project(tmp_path / "proj")
    (tmp_path / "out").mkdir()
    assert cli.main(["-i", str(root), "-o", str(tmp_path / "out"), "--select", "ASC9"]) == 2
    assert "no ASC code starts with ASC9" in capsys.readouterr().err


@pytest.mark.parametrize("selection, advisory", [("ASC", False), ("ASC1", False), ("ASC10", False),
                                                 ("ASC1,ASC103", True)])
def test_a_family_selection_leaves_the_advisory_codes_off_in_both(tmp_path, monkeypatch, selection, advisory):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "up.py").write_text("import torch.nn.functional as F\ny = F.interpolate(x, scale_factor=2)\n",
                                encoding="utf-8")  # ASC103 in 2.8.0: scale_factor is not supported
    monkeypatch.chdir(root)
    expected = _flake8(root, f"--select={selection}", "--ascend-torch-version=2.8.0")
    assert _analyse(root, tmp_path / "out", f"--select={selection}", "-v", "2.8.0") == expected
    assert any(code == "ASC103" for *_, code, _ in expected) == advisory
