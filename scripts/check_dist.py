"""Check the sdist and wheel that `make dist` built: what a release must hold.

* one wheel and one sdist, both of the version in `llmgw_wire/_version.py`,
  which is the CHANGELOG's newest section (`## [X.Y.Z] - YYYY-MM-DD`);
* the wheel holds LICENSE, `py.typed` and every `.proto` file of `proto/`
  (under `llmgw_wire/proto/`); the sdist holds LICENSE and `proto/`;
* the wheel's metadata: the license, `Requires-Python`, no runtime
  requirement on grpclib (it is the `grpclib` extra), the project's URLs, and
  the package description an index shows (`DESCRIPTION.md`, Markdown): an
  install line and only absolute links, as a wheel has no `docs/` folder.

Usage: `python scripts/check_dist.py dist`; exits non-zero listing every problem.
"""

from __future__ import annotations

import email.parser
import re
import sys
import tarfile
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
# The newest section of the CHANGELOG: its first `## [X.Y.Z] - date` heading.
SECTION = re.compile(r"^## \[(?P<version>[^\]]+)\] - \d{4}-\d{2}-\d{2}$", re.MULTILINE)


def changelog_version() -> str | None:
    """The version of the CHANGELOG's newest released section, if it has one."""
    found = SECTION.search((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))
    return found["version"] if found else None


def package_version() -> str:
    """`__version__` as `llmgw_wire/_version.py` states it (read, not imported)."""
    text = (ROOT / "llmgw_wire" / "_version.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE)
    assert found, "llmgw_wire/_version.py states no __version__"
    return found[1]


def protos() -> list[str]:
    """Every `.proto` file of the schema, relative to `proto/`."""
    return sorted(str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto").rglob("*.proto"))


def problems(dist: Path) -> list[str]:
    """Everything wrong with the sdist and wheel in `dist`."""
    version = package_version()
    found: list[str] = []
    newest = changelog_version()
    if newest != version:
        found.append(f"CHANGELOG.md's newest section is {newest!r}, the package is {version!r}")
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    expected = (f"llmgw_wire-{version}-py3-none-any.whl", f"llmgw_wire-{version}.tar.gz")
    if [p.name for p in wheels] != [expected[0]] or [p.name for p in sdists] != [expected[1]]:
        found.append(f"{dist} holds {[p.name for p in wheels + sdists]}, not {list(expected)}")
        return found
    with zipfile.ZipFile(wheels[0]) as archive:
        names = set(archive.namelist())
        (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = email.parser.Parser().parsestr(archive.read(meta).decode())
    info = meta.rsplit("/", 1)[0]
    needed = {
        f"{info}/licenses/LICENSE",
        "llmgw_wire/py.typed",
        *(f"llmgw_wire/proto/{p}" for p in protos()),
    }
    found += [f"the wheel lacks {n}" for n in sorted(needed - names)]
    if metadata["License-Expression"] != "Apache-2.0":
        found.append(f"License-Expression is {metadata['License-Expression']!r}")
    if metadata["Requires-Python"] != ">=3.10":
        found.append(f"Requires-Python is {metadata['Requires-Python']!r}")
    urls = {u.split(",")[0].strip() for u in metadata.get_all("Project-URL") or []}
    if not {"Documentation", "Source"} <= urls:
        found.append(f"Project-URL names {sorted(urls)}, not Documentation and Source")
    description = str(metadata.get_payload())
    if metadata["Description-Content-Type"] != "text/markdown":
        found.append(f"Description-Content-Type is {metadata['Description-Content-Type']!r}")
    if "pip install 'llmgw-wire" not in description:
        found.append("the package description has no install line")
    relative = [u for u in re.findall(r"\]\(([^)]+)\)", description) if "://" not in u]
    found += [f"the package description links {u}, which is not absolute" for u in relative]
    for line in metadata.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        core = requirement.marker is None or requirement.marker.evaluate({"extra": ""})
        if core and requirement.name == "grpclib":
            found.append(f"the core package requires {line}")
    with tarfile.open(sdists[0]) as archive:
        members = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    sdist_needed = {
        "LICENSE",
        "pyproject.toml",
        "DESCRIPTION.md",
        *(f"proto/{p}" for p in protos()),
    }
    found += [f"the sdist lacks {n}" for n in sorted(sdist_needed - members)]
    return found


def main() -> int:
    """Check `sys.argv[1]`; return the process exit status."""
    dist = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "dist"
    wrong = problems(dist)
    for line in wrong:
        print(f"check-dist: {line}")
    if not wrong:
        print(f"check-dist: {', '.join(sorted(p.name for p in dist.iterdir()))} are complete")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
