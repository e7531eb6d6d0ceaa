"""The documentation is written for users: no working notes, commit names or machine paths.

The pages users read (README.md, docs/, collector-config/README.md) must not refer to what they
cannot see: commits, measurement rounds, targets "not met", the team, the machine the docs were
written on, internal specifications, seeds or scenario ids.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "collector-config" / "README.md",
                *(ROOT / "docs").glob("*.md"), ROOT / "docs" / "render_dashboard.py"])

MARKERS = {
    "a round of work": re.compile(r"\b(?:this|previous|first|last|next) round\b", re.IGNORECASE),
    "a target not met": re.compile(r"\bnot met\b", re.IGNORECASE),
    "the team": re.compile(r"\bleft to the team\b", re.IGNORECASE),
    "a machine path": re.compile(r"/work/|/tmp/snap|/root/"),
    "a seed file": re.compile(r"\bseed 0\d", re.IGNORECASE),
    "a specification users cannot see": re.compile(r"\bspecs?\b|\bspecification of this\b",
                                                   re.IGNORECASE),
    "a scenario id": re.compile(r"\b[HF]\d{1,2}\b"),
    "a figure before and after a change": re.compile(r"\d\s*(?:µs|ms|s|MB|KB|%)?\s*→\s*\d"),
    "a comparison with an earlier version": re.compile(
        r"\|\s*before\s*\||\bnow/before\b|\bused to (?:be|fail|take|cost)\b|"
        r"\blatest (?:two|three) runs\b|\bin our runs\b|\bas before\b", re.IGNORECASE),
}
"""What may not appear anywhere on a page."""

_HEX = re.compile(r"(?<![\w~-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w-])")
_CODE = re.compile(r"```.*?```|`[^`\n]+`", re.DOTALL)
_IDS_IN_CODE = frozenset({8, 16, 32})
"""Lengths that are example output in code (signature digests, span and trace ids), not
commits."""


def commit_like(text: str) -> list[str]:
    """Return the hex words of ``text`` that look like commit names.

    Outside code every hex word of 7 to 40 characters (with digits and letters) counts; inside
    code, those of 8, 16 and 32 characters are example digests and ids.
    """
    found = []
    for start, end, in_code in _segments(text):
        for word in _HEX.findall(text[start:end]):
            if not (in_code and len(word) in _IDS_IN_CODE):
                found.append(word)
    return found


def _segments(text: str) -> list[tuple[int, int, bool]]:
    spans, last = [], 0
    for match in _CODE.finditer(text):
        spans += [(last, match.start(), False), (match.start(), match.end(), True)]
        last = match.end()
    return [*spans, (last, len(text), False)]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_has_no_working_notes(page: Path) -> None:
    """No page mentions rounds of work, unmet targets, the team, machine paths, specifications,
    seeds, scenario ids, or how a figure changed from an earlier version (that history is in
    benchmarks/results/HISTORY.md)."""
    text = page.read_text(encoding="utf-8")
    found = {what: pattern.findall(text) for what, pattern in MARKERS.items()}
    assert {what: hits for what, hits in found.items() if hits} == {}


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_names_no_commit(page: Path) -> None:
    """No page names a commit."""
    assert commit_like(page.read_text(encoding="utf-8")) == []


class TestMarkers:
    """The patterns catch what they are for, and leave example output alone."""

    @pytest.mark.parametrize("text", [
        "measured at commit c5b36a0", "see `af81567`", "the figures of this round",
        "The target is **not met**", "a decision left to the team",
        "PYTHONPATH=/work/snap python", "seed 002's step budget", "as the spec asks",
        "scenario F20 asks", "(H18)", "88 → 149 µs", "19.5 µs → 16.8 µs",
        "| path | before | after |", "now/before", "used to fail the whole batch",
        "in the latest two runs", "no tool span at all in our runs",
    ])
    def test_catches(self, text: str) -> None:
        """Each of these is caught by one marker or the commit check."""
        assert commit_like(text) or any(p.search(text) for p in MARKERS.values())

    @pytest.mark.parametrize("text", [
        '`"run_id": "6143f831f09ff9b0e86f1d11d41297b6"`', '```\n"call": "64cbaf80"\n```',
        "`tpl-1a2b3c4d`", "`~1a2b3c4d`", "--seed 42", "a specific tool", "HTTP 401",
        "pages 1-100", "the F1 key", "A→r1, B→r2", "triage → billing", "before each rerun",
    ])
    def test_leaves_alone(self, text: str) -> None:
        """Example ids in code, hashed labels, flags and ordinary words pass."""
        assert not commit_like(text)
        assert not any(p.search(text) for name, p in MARKERS.items() if name != "a scenario id")



def _ci_test_command_lines() -> str:
    """The lines of ``.ci/run`` that find README's test command and run it."""
    ci = (ROOT / ".ci" / "run").read_text()
    start = ci.index("TEST_COMMAND=$(")
    end = ci.index("\n", ci.index('eval "$TEST_COMMAND"'))
    return ci[start:end].replace("rm -rf .venv\n", "")


def test_ci_runs_readme_test_command(tmp_path) -> None:
    """``.ci/run`` runs the line after README's marker, and stops when any step of it fails."""
    import subprocess

    lines = _ci_test_command_lines()
    found = subprocess.run(["bash", "-c", lines.split("\nif ")[0] + '\necho "$TEST_COMMAND"'],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert found.rstrip().endswith("pip install . --group test && pytest"), found
    (tmp_path / "README.md").write_text(
        "<!-- test-command -->\n```bash\necho one && false && echo three\n```\n")
    script = f"set -euo pipefail\n{lines}\necho reached-the-end\n"
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                            check=False)
    assert result.returncode != 0 and result.stdout.split() == ["one"], result


def _panel_titles() -> set[str]:
    import json

    from otel_loopguard.cli._assets import asset_files

    def walk(panels: list[dict]) -> list[dict]:
        return [q for p in panels for q in (p, *walk(p.get("panels", [])))]

    dashboard = json.loads(asset_files()["loopguard.json"])
    return {p["title"] for p in walk(dashboard["panels"])}


_PANEL_MENTION = re.compile(r"\*([^*\n]+)\* panel")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_named_panels_exist(page: Path) -> None:
    """Every panel a page names (``*Title* panel``, and the rows of dashboards.md's panel
    tables) is a panel of the shipped dashboard."""
    text = page.read_text(encoding="utf-8")
    named = set(_PANEL_MENTION.findall(text))
    if page.name == "dashboards.md":
        section = text.split("## The panels", 1)[1].split("\n## ", 1)[0]
        named |= {row.split("|")[1].strip().removesuffix(" (table)")
                  for row in section.splitlines()
                  if row.startswith("|") and not row.startswith(("| Panel", "|---"))}
    assert named - _panel_titles() == set()


def test_cli_json_example_is_real_output(capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """cli.md's JSON example is what ``check --format json`` prints for the example traces,
    each run's findings trimmed to the first and last, as the page says."""
    import json

    from otel_loopguard.cli import main

    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    after = page[page.index("A real\noutput"):]
    start = after.index("```json") + len("```json")
    shown = json.loads(after[start:after.index("```", start)])
    monkeypatch.chdir(ROOT)  # the page names the files as a checkout's root names them
    assert main(["check", "--format", "json", "examples/traces/looping_agent.jsonl",
                 "examples/traces/healthy_agent.jsonl"]) == 1
    actual = json.loads(capsys.readouterr().out)
    for run in actual["runs"]:
        run["findings"] = run["findings"][:1] + run["findings"][1:][-1:]
    assert shown == actual


_FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.MULTILINE)


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code, where ``](x)`` is no link."""
    return re.sub(r"`[^`\n]*`", "", _FENCE.sub("", text))


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown page: lower case, punctuation but
    ``-`` and ``_`` dropped, spaces made ``-``, a repeated one suffixed ``-1``, ``-2``..."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for title in _HEADING.findall(_FENCE.sub("", text)):
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").strip().lower()).replace(" ", "-")
        count = seen.get(slug, -1) + 1
        seen[slug] = count
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` whose file does not exist, or whose ``#anchor`` is no
    heading of the Markdown page it names."""
    broken = []
    for target in _LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:...
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and \
                anchor not in heading_anchors(linked.read_text(encoding="utf-8")):
            broken.append(f"{target}: no such heading in {linked.name}")
    return broken


@pytest.mark.parametrize("page", [p for p in PAGES if p.suffix == ".md"],
                         ids=[str(p.relative_to(ROOT)) for p in PAGES if p.suffix == ".md"])
def test_links_reach_their_page_and_heading(page: Path) -> None:
    """Every relative link of a page names a file of the repository, and its ``#anchor`` a
    heading of the page it links to, as GitHub renders them."""
    assert broken_links(page) == []


def test_broken_links_are_caught(tmp_path: Path) -> None:
    """The link check reports a missing file and a missing heading, and passes a heading with
    code and punctuation, a repeated heading and links inside code."""
    (tmp_path / "other.md").write_text("# Other\n\n## The `serve` options (TLS)\n\n## Run\n\n"
                                       "## Run\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("[a](other.md#the-serve-options-tls) [b](other.md#run-1) [c](#top)\n"
                    "[d](missing.md) [e](other.md#nowhere) `[f](nowhere.md)`\n\n# Top\n\n"
                    "```\n[g](nowhere.md)\n```\n", encoding="utf-8")
    assert broken_links(page) == ["missing.md: no such file",
                                  "other.md#nowhere: no such heading in other.md"]
