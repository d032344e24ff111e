"""The documentation builds as a site with no broken link, anchor or missing page, and the README
stays a landing page whose links resolve."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_mkdocs_build_is_strict_and_clean(tmp_path: Path) -> None:
    # Not -q: mkdocs counts the warnings it logs, and a quiet build logs none, so strict would pass.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "configuration" / "index.html").is_file()
    assert (tmp_path / "site" / "img" / "quickstart-traffic.png").is_file()


def test_readme_is_short_and_its_links_resolve() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) < 200
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert local, "the README links to no page"
    assert [t for t in local if not (REPO / t).exists()] == []


def test_no_history_in_readme_or_docs() -> None:
    """The documentation speaks about the software: no run dates, sessions or issue numbers."""
    offending = []
    for path in [REPO / "README.md", *(REPO / "docs").rglob("*.md")]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\b20\d\d-\d\d-\d\d\b|\b(first|second|third|[a-z]+th) session\b|\bissue \d+", line, re.I):
                offending.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offending == []
