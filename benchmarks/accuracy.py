"""Score the linter against findings judged by hand (docs/accuracy.md).

    python benchmarks/accuracy.py score                 # every split; precision and recall per code
    python benchmarks/accuracy.py score --split test    # only the held-out test set
    python benchmarks/accuracy.py sample --split test --per-code 10 --seed 27   # findings to judge next

The judged rows live in ``benchmarks/truth/<corpus>.tsv`` with the columns
``corpus path line code verdict version reason``: ``fire`` says the code belongs on that line, ``silent`` that
it does not. A row is a judgement of a site, not of a run, so the same rows score any later version of the
rules: a reported finding whose row says ``fire`` is right, one whose row says ``silent`` is wrong, a ``fire``
row without a finding is a miss. Findings without a row are counted as unjudged, never guessed. A ``fire`` row on
a line that a finding of the same code names as a repeat ("again in this function on line N") is covered: the
user learns of it, so it is no miss, but it is no finding of its own either (recall counts it, precision not).

The headline covers the codes on by default plus ASC509, ASC510 and ASC603; the other advisory codes (off by
default: ASC103, and those the default-set rule of docs/accuracy.md turned off) are scored on their own, and a
last line scores every judged code together. Which codes are on by default is read from the ``codes`` table of
the flake8_ascend that runs (``PYTHONPATH`` chooses it), so an older checkout is scored by its own defaults. Corpora and their split come from ``benchmarks/corpora.py``.
"""
from __future__ import annotations

import argparse
import csv
import random
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpora  # noqa: E402

TRUTH = HERE / "truth"
COLUMNS = ["corpus", "path", "line", "code", "verdict", "version", "reason"]
from flake8_ascend.codes import OPTIONAL_CODES  # noqa: E402

JUDGED_ADVISORY = {"ASC509", "ASC510", "ASC603"}  # advisory, but in the headline (issue 27's definition)
EXTRA = ",".join(sorted(OPTIONAL_CODES))  # every advisory code is reported, to be scored
SEPARATE = set(OPTIONAL_CODES) - JUDGED_ADVISORY  # scored on their own, not in the headline
DEFAULT_VERSION = "default"

Site = Tuple[str, str, int, str]  # corpus, path, line, code
REPEATS = re.compile(r"\(again in this function on lines? ([\d, ]+)\)")
BRANCH = re.compile(r"\(the CUDA branch also has: ([^()]*(?:\([^()]*\)[^()]*)*)\)$")
BRANCH_ITEM = re.compile(r"(ASC\d+)\b.*? on lines? ([\d, ]+)$")


def findings(corpus: corpora.Corpus, version: str) -> Dict[Site, str]:
    """(corpus, path, line, code) -> message of every finding flake8 reports on the corpus."""
    tree = corpora.fetch(corpus)
    command = [sys.executable, "-m", "flake8", "--select", "ASC", "--extend-select", EXTRA, "-j", "2",
               "--format", "%(path)s\t%(row)d\t%(code)s\t%(text)s"]
    if version != DEFAULT_VERSION:
        command += ["--ascend-torch-version", version]
    run = subprocess.run(command + ["."], cwd=tree, capture_output=True, text=True)
    if run.returncode not in (0, 1) or "Traceback" in run.stderr:  # flake8 exits 1 when a plugin raises
        raise SystemExit(f"flake8 failed on {corpus.name}: {run.stderr.strip().splitlines()[-1:]}")
    found: Dict[Site, str] = {}
    for line in run.stdout.splitlines():
        path, row, code, text = line.split("\t", 3)
        found[(corpus.name, path[2:] if path.startswith("./") else path, int(row), code)] = text
    return found


def read_truth(names: Iterable[str]) -> Dict[Tuple[Site, str], dict]:
    """(site, version) -> judged row, from the truth files of ``names``."""
    rows: Dict[Tuple[Site, str], dict] = {}
    for name in names:
        path = TRUTH / f"{name}.tsv"
        if not path.exists():
            continue
        with open(path, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                if row["verdict"] not in ("fire", "silent"):
                    raise SystemExit(f"{path}: verdict must be fire or silent, not {row['verdict']!r}")
                site = (row["corpus"], row["path"], int(row["line"]), row["code"])
                rows[(site, row["version"] or DEFAULT_VERSION)] = row
    return rows


def chosen(split: Optional[str], names: List[str]) -> List[corpora.Corpus]:
    pool = [c for c in corpora.CORPORA if c.split in ("named", "tuning", "test")]
    if names:
        pool = [c for c in pool if c.name in names]
    if split:
        pool = [c for c in pool if c.split == split]
    return pool


def covered(found: Dict[Site, str]) -> Set[Site]:
    """Sites a finding names as folded into it (engine.fold): repeats of itself in the same function, and the
    findings of the CUDA branch its test guards."""
    sites: Set[Site] = set()
    for (corpus, path, _, code), text in found.items():
        match = REPEATS.search(text)
        if match:
            sites.update((corpus, path, int(line), code) for line in match.group(1).split(", "))
        match = BRANCH.search(text)
        for item in match.group(1).split("; ") if match else ():
            inner = BRANCH_ITEM.search(item)
            if inner:
                sites.update((corpus, path, int(line), inner.group(1)) for line in inner.group(2).split(", "))
    return sites


class Tally:
    def __init__(self) -> None:
        self.right = self.wrong = self.missed = self.covered = self.unjudged = 0

    def precision(self) -> Optional[float]:
        judged = self.right + self.wrong
        return self.right / judged if judged else None

    def recall(self) -> Optional[float]:
        wanted = self.right + self.covered + self.missed
        return (self.right + self.covered) / wanted if wanted else None


def _fmt(value: Optional[float]) -> str:
    return "  -  " if value is None else f"{value:.2f}"


def score(args: argparse.Namespace) -> int:
    groups = defaultdict(list)
    for corpus in chosen(args.split, args.corpora):
        groups[corpus.split].append(corpus)
    status = 0
    for split, members in sorted(groups.items()):
        truth = read_truth(c.name for c in members)
        versions = sorted({version for _, version in truth} | {DEFAULT_VERSION})
        per_code: Dict[str, Tally] = defaultdict(Tally)
        wrong_rows: List[str] = []
        for version in versions:
            judged = {site: row for (site, v), row in truth.items() if v == version}
            reported: Set[Site] = set()
            named: Set[Site] = set()
            for corpus in members:
                found = findings(corpus, version)
                reported |= set(found)
                named |= covered(found)
            for site, row in judged.items():
                tally = per_code[site[3]]
                if site in reported:
                    if row["verdict"] == "fire":
                        tally.right += 1
                    else:
                        tally.wrong += 1
                        wrong_rows.append(f"  wrong   {':'.join(map(str, site))}  {row['reason']}")
                elif row["verdict"] == "fire" and site in named:
                    tally.covered += 1
                elif row["verdict"] == "fire":
                    tally.missed += 1
                    wrong_rows.append(f"  missed  {':'.join(map(str, site))}  {row['reason']}")
            if version == DEFAULT_VERSION:
                for site in reported - set(judged):
                    per_code[site[3]].unjudged += 1
        print(f"== {split}: {', '.join(c.name for c in members)}")
        print(f"{'code':8} {'right':>5} {'wrong':>5} {'covered':>7} {'missed':>6} {'unjudged':>8}  precision  recall")
        headline, separate, every = Tally(), Tally(), Tally()
        for code in sorted(per_code):
            tally = per_code[code]
            for total in (separate if code in SEPARATE else headline, every):
                total.right += tally.right
                total.wrong += tally.wrong
                total.missed += tally.missed
                total.covered += tally.covered
                total.unjudged += tally.unjudged
            print(f"{code:8} {tally.right:5} {tally.wrong:5} {tally.covered:7} {tally.missed:6} {tally.unjudged:8}"
                  f"  {_fmt(tally.precision()):>9}  {_fmt(tally.recall()):>6}")
        advisory = ",".join(sorted(SEPARATE))
        for label, tally in (("headline (default codes + ASC509/510/603)", headline),
                             (f"advisory, off by default ({advisory})", separate),
                             ("every judged code", every)):
            print(f"{label}: precision {_fmt(tally.precision())} ({tally.right}/{tally.right + tally.wrong}),"
                  f" recall {_fmt(tally.recall())} ({tally.right + tally.covered}/"
                  f"{tally.right + tally.covered + tally.missed}),"
                  f" unjudged findings {tally.unjudged}")
        if args.verbose:
            print("\n".join(sorted(wrong_rows)))
        if args.min_precision and (headline.precision() or 0) < args.min_precision:
            status = 1
    return status


def sample(args: argparse.Namespace) -> int:
    """Unjudged findings, at most ``--per-code`` per code over the chosen corpora, in a fixed random order."""
    members = chosen(args.split, args.corpora)
    truth = read_truth(c.name for c in members)
    judged = {site for site, version in truth if version == args.version}
    by_code: Dict[str, List[Tuple[Site, str]]] = defaultdict(list)
    for corpus in members:
        for site, text in sorted(findings(corpus, args.version).items()):
            if site not in judged:
                by_code[site[3]].append((site, text))
    rng = random.Random(args.seed)
    writer = csv.writer(sys.stdout, delimiter="\t", lineterminator="\n")
    writer.writerow(COLUMNS + ["message"])
    for code in sorted(by_code):
        if args.codes and not any(code.startswith(prefix) for prefix in args.codes):
            continue
        rows = by_code[code]
        rng.shuffle(rows)
        for site, text in sorted(rows[: args.per_code]):
            writer.writerow([*map(str, site), "", args.version, "", text])
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, helptext in (("score", "precision and recall against benchmarks/truth"),
                           ("sample", "unjudged findings to judge, as truth rows with an empty verdict")):
        sub = commands.add_parser(name, help=helptext)
        sub.add_argument("corpora", nargs="*", help="only these corpora (default: every judged corpus)")
        sub.add_argument("--split", choices=("named", "tuning", "test"), help="only this split")
    commands.choices["score"].add_argument("--verbose", action="store_true", help="list every wrong and missed site")
    commands.choices["score"].add_argument("--min-precision", type=float, help="exit 1 below this headline precision")
    commands.choices["sample"].add_argument("--per-code", type=int, default=10)
    commands.choices["sample"].add_argument("--seed", type=int, default=27)
    # one comma-separated value, repeatable: ``nargs="*"`` swallowed the corpus names that followed it
    commands.choices["sample"].add_argument("--codes", action="extend", type=lambda text: text.split(","),
                                            help="code prefixes to sample, comma-separated (default: all)")
    commands.choices["sample"].add_argument("--version", default=DEFAULT_VERSION)
    args = parser.parse_args(argv)
    return score(args) if args.command == "score" else sample(args)


if __name__ == "__main__":
    sys.exit(main())
