"""--format html: one self-contained page with every finding, escaped, and working in a real browser."""
from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from flake8_ascend import cli, report_page
from flake8_ascend.engine import Finding
from flake8_ascend.rewrite import Kind, Rewrite

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "yolo_mini"
HOSTILE = '</script><img src=x onerror="document.title=1">'


def run_main(*args: str) -> int:
    Path(args[args.index("-o") + 1]).mkdir(parents=True, exist_ok=True)
    return cli.main(list(args), out=io.StringIO(), err=io.StringIO())


def page_of(project: Path, out: Path, *flags: str) -> str:
    assert run_main("-i", str(project), "-o", str(out), "--format", "html", *flags) == 0
    return (out / f"{project.name}_analysis" / report_page.PAGE_NAME).read_text(encoding="utf-8")


def hostile_project(tmp_path: Path) -> Path:
    project = tmp_path / "hostile"
    project.mkdir()
    (project / "train.py").write_text(
        f"import torch\nnote = {HOSTILE!r}\nx = torch.zeros(3).cuda()  # {HOSTILE}\n", encoding="utf-8")
    return project


def test_every_finding_of_the_run_is_on_the_page(tmp_path):
    assert run_main("-i", str(SAMPLE), "-o", str(tmp_path / "json"), "--format", "json") == 0
    findings = json.loads((tmp_path / "json" / "yolo_mini_analysis" / "findings.json").read_text())
    page = page_of(SAMPLE, tmp_path / "html")
    codes = re.findall(r'<article class="finding" data-code="(ASC\d+)"', page)
    assert sorted(codes) == sorted(f["code"] for f in findings) and codes


def test_page_loads_nothing_from_outside(tmp_path):
    page = page_of(SAMPLE, tmp_path)
    assert not re.search(r"<(link|iframe|object|embed|img)\b|\b(src|href)\s*=|url\(|@import", page)
    assert "default-src 'none'" in page


def test_totals_fix_command_and_rewrite_diff(tmp_path):
    page = page_of(SAMPLE, tmp_path)
    fixable = page.count('data-category="fixable"')
    assert fixable and f'<div class="total fixable"><b>{fixable}</b>' in page
    assert "--fix --select ASC2" in page  # torch_apis rewrites CUDA code only when ASC2 is selected
    assert "Automatic rewrite" in page and ".npu(" in page
    assert "<svg" in page and "Findings per family" in page


def test_hostile_source_is_shown_as_text(tmp_path):
    page = page_of(hostile_project(tmp_path), tmp_path / "out")
    assert HOSTILE not in page and "<img" not in page
    assert "&lt;/script&gt;&lt;img src=x onerror=" in page
    assert page.count("<script>") == 1 and page.count("</script>") == 1


def test_migrate_page_lists_the_changes(tmp_path):
    page = page_of(SAMPLE, tmp_path, "-m", "migrate")
    assert "Changes made in the migrated copy" in page and "<td>ASC202</td>" in page


def test_other_modes_reject_html(tmp_path):
    err = io.StringIO()
    code = cli.main(["-i", str(SAMPLE), "-o", str(tmp_path), "-m", "dynamic_shape", "--format", "html"],
                    out=io.StringIO(), err=err)
    assert code == 2 and "writes no html output" in err.getvalue() and "Traceback" not in err.getvalue()


def test_each_finding_counts_in_one_category():
    cuda = Finding(1, 0, "ASC202", "m")
    assert report_page.category(cuda) == "blocking"
    assert report_page.category(Finding(1, 0, "ASC202", "m", rewrite=Rewrite(Kind.METHOD, "npu"))) == "fixable"
    assert report_page.category(Finding(1, 0, "ASC103", "m")) == "check"
    assert report_page.category(Finding(1, 0, "ASC402", "m")) == "dynamic"
    assert report_page.category(Finding(1, 0, "ASC303", "m")) == "performance"
    assert report_page.category(Finding(1, 0, "ASC601", "m")) == "precision"


def test_diff_hunks_give_the_old_lines_they_cover():
    diff = "--- a/x.py\n+++ b/x.py\n@@ -3,2 +3,2 @@\n-a\n+b\n c\n@@ -9 +9 @@\n-d\n+e\n"
    assert [(first, last) for first, last, _ in report_page.diff_hunks(diff)] == [(3, 4), (9, 9)]


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
OFFLINE_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium(page: Path, profile: Path, *flags: str) -> subprocess.CompletedProcess:
    command = [CHROMIUM, *OFFLINE_FLAGS, f"--user-data-dir={profile}", *flags, page.as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (Debian: apt-get install chromium)")
def test_page_in_a_real_browser(tmp_path):
    """The script runs (the filter bar shows), nothing hostile becomes an element, a screenshot is taken."""
    project = hostile_project(tmp_path)
    static = page_of(project, tmp_path / "out")
    path = tmp_path / "out" / "hostile_analysis" / report_page.PAGE_NAME
    dom = chromium(path, tmp_path / "profile", "--dump-dom").stdout
    assert '<div class="bar">' in dom  # the inline script ran and showed the filters
    assert "<img" not in dom and "&lt;img src=x" in dom
    finding = r'<article class="finding" data-code='
    assert len(re.findall(finding, dom)) == len(re.findall(finding, static)) >= 1
    shot = tmp_path / "page.png"
    chromium(path, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1200,900")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
