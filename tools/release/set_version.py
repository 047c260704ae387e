"""Read or set the one version of the release (the core and the six environment packages).

    python tools/release/set_version.py            # print the seven versions; status 1 if they disagree
    python tools/release/set_version.py 0.4.0      # set all seven (and the six `exactgrade==` pins)

The version lives in exactgrade/_version.py; each environments/<id>/pyproject.toml repeats it in
`[project].version` and in its `exactgrade==` pin, because `prime env push` builds that folder
alone and reads its metadata statically. Standard library only: runs without the checkout
installed.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERSION_FILE = Path("exactgrade") / "_version.py"
_VERSION_LINE = re.compile(r'^__version__ = "([^"]*)"$', re.MULTILINE)
_PROJECT_VERSION_LINE = re.compile(r'^version = "([^"]*)"$', re.MULTILINE)
_PIN = re.compile(r'"exactgrade(\[[a-z0-9_,-]+\])?==([^"]*)"')
# Final releases and pre-releases only (no local or dev versions on an index).
_RELEASE = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)((a|b|rc)(0|[1-9]\d*))?$")


@dataclass(frozen=True, slots=True)
class VersionSite:
    """One place that states the release's version: a file and what in it."""

    path: Path
    what: str
    version: str


class VersionError(ValueError):
    """A file does not state the version in the one expected place (message names it)."""


def environment_pyprojects(root: Path) -> list[Path]:
    return sorted((root / "environments").glob("*/pyproject.toml"))


def read_versions(root: Path = ROOT) -> list[VersionSite]:
    """Every place the version is stated: the core's file, then per environment its version and pin."""
    sites = [VersionSite(VERSION_FILE, "__version__", _one(_VERSION_LINE, root / VERSION_FILE).group(1))]
    pyprojects = environment_pyprojects(root)
    if not pyprojects:
        raise VersionError(f"{root}: no environments/*/pyproject.toml (not an exactgrade checkout?)")
    for pyproject in pyprojects:
        relative = pyproject.relative_to(root)
        project = tomllib.loads(pyproject.read_text()).get("project", {})
        pins = [d for d in project.get("dependencies", []) if re.match(r"exactgrade\b", d)]
        if len(pins) != 1 or "==" not in pins[0]:
            raise VersionError(f"{relative}: wants one `exactgrade==VERSION` dependency, has {pins}")
        if not isinstance(project.get("version"), str):
            raise VersionError(f"{relative}: no [project].version")
        sites.append(VersionSite(relative, "[project].version", project["version"]))
        sites.append(VersionSite(relative, "exactgrade pin", pins[0].split("==", 1)[1]))
    return sites


def set_version(version: str, root: Path = ROOT) -> list[VersionSite]:
    """Write `version` into every site, then read them back (all must now say it)."""
    if not _RELEASE.match(version):
        raise VersionError(f"{version!r} is not a release version (X.Y.Z, optionally aN/bN/rcN)")
    read_versions(root)
    pyprojects = environment_pyprojects(root)
    for pyproject in pyprojects:  # every line to rewrite is found once before anything is written
        _one(_PROJECT_VERSION_LINE, pyproject)
        _one(_PIN, pyproject)
    path = root / VERSION_FILE
    path.write_text(_VERSION_LINE.sub(f'__version__ = "{version}"', path.read_text()))
    for pyproject in pyprojects:
        text = _PROJECT_VERSION_LINE.sub(f'version = "{version}"', pyproject.read_text())
        pyproject.write_text(_PIN.sub(lambda m: f'"exactgrade{m.group(1) or ""}=={version}"', text))
    sites = read_versions(root)
    if {site.version for site in sites} != {version}:
        raise VersionError(f"after writing {version}: {sites}")
    return sites


def _one(pattern: re.Pattern[str], path: Path) -> re.Match[str]:
    """The single match of `pattern` in the file (a second one would be rewritten blindly)."""
    found = list(pattern.finditer(path.read_text()))
    if len(found) != 1:
        raise VersionError(f"{path}: expected one line matching {pattern.pattern!r}, found {len(found)}")
    return found[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", nargs="?", help="the new version of all seven packages (omit to check)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this script's)")
    args = parser.parse_args(argv)
    try:
        sites = set_version(args.version, args.root) if args.version else read_versions(args.root)
    except (VersionError, OSError, tomllib.TOMLDecodeError) as error:
        print(f"set_version: error: {error}", file=sys.stderr)
        return 2
    for site in sites:
        print(f"{site.version:10} {site.path} ({site.what})")
    versions = {site.version for site in sites}
    if len(versions) != 1:
        print(f"set_version: the packages disagree: {sorted(versions)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
