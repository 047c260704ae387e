"""The read-only runtime tree the sandbox sees: interpreter, standard library, allowed packages.

The project's interpreter lives under root's 0700 home (pyenv) and its site-packages holds
everything (datasets, verifiers, the editable exactgrade finder). The sandbox instead gets a
tree built once per machine under the state dir, made of hard links (copies across devices):

    python/          the interpreter prefix: bin/, lib/libpython*, lib/python3.X/ minus
                     site-packages and the test suite
    site-python/     sympy, mpmath                                (profile "python")
    site-torch/      the above + torch, torchgen, numpy, typing_extensions (profile "torch")
    lib/_egwire/     wire.py + values.py: the encoder/decoder, under a neutral name
    lib/_eginside/   the zygote, worker, read-back and confinement code

so `import exactgrade` fails inside and nothing else of the host is reachable. The tree is keyed
by a hash of the interpreter, the package versions and the shipped sources, so an upgrade
builds a fresh tree instead of mutating one in use.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

PROFILE_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "python": ("sympy", "mpmath"),
    "torch": ("sympy", "mpmath", "torch", "numpy", "typing_extensions"),
}
# Top-level import names that torch needs but that its distribution metadata files elsewhere.
_EXTRA_TOP_LEVEL: dict[str, tuple[str, ...]] = {"torch": ("torchgen",)}
_STDLIB_SKIP = frozenset({"site-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip"})
_SHIPPED = {
    "_egwire": ("wire.py", "values.py"),
    "_eginside": ("__init__.py", "confine.py", "readback.py", "worker.py", "zygote.py"),
}


def default_state_dir() -> Path:
    return Path(os.environ.get("EXACTGRADE_SANDBOX_STATE", "/var/lib/exactgrade/sandbox"))


@dataclass(frozen=True, slots=True)
class Runtime:
    """Paths of one built runtime tree (host paths)."""

    root: Path

    @property
    def python_prefix(self) -> Path:
        return self.root / "python"

    @property
    def python(self) -> Path:
        return self.python_prefix / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"

    @property
    def lib(self) -> Path:
        return self.root / "lib"

    def site(self, profile: str) -> Path:
        return self.root / f"site-{profile}"


def _source_files() -> dict[str, Path]:
    """Shipped file name (package/file) -> source path in this checkout."""
    package_dir = Path(__file__).resolve().parent
    project_dir = package_dir.parent
    files = {f"_egwire/{name}": project_dir / name for name in _SHIPPED["_egwire"]}
    files.update({f"_eginside/{name}": package_dir / "inside" / name for name in _SHIPPED["_eginside"]})
    return files


def _distribution_paths(dist_name: str) -> list[Path]:
    """Top-level files/dirs of an installed distribution (packages, modules, .libs, dist-info)."""
    dist = metadata.distribution(dist_name)
    base = Path(dist.locate_file(""))
    tops: set[str] = set()
    for file in dist.files or ():
        first = file.parts[0]
        if first in ("..", "__pycache__") or first.endswith(".pth"):
            continue
        tops.add(first)
    tops.update(_EXTRA_TOP_LEVEL.get(dist_name, ()))
    return sorted(base / top for top in tops if (base / top).exists())


@functools.cache
def _key() -> str:
    """Hash of what goes into the tree (computed once per process: it reads every shipped source)."""
    digest = hashlib.sha256()
    digest.update(sys.version.encode())
    digest.update(os.path.realpath(sys.executable).encode())
    for name in sorted({d for dists in PROFILE_DISTRIBUTIONS.values() for d in dists}):
        digest.update(f"{name}={metadata.version(name)}".encode())
    for name, path in sorted(_source_files().items()):
        digest.update(name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _link_tree(src: Path, dst: Path, skip: frozenset[str] = frozenset()) -> None:
    """Mirror src into dst with hard links (copies if linking fails); symlinks kept as symlinks."""
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
        return
    if src.is_file():
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
        return
    dst.mkdir(mode=0o755)
    for entry in sorted(os.scandir(src), key=lambda e: e.name):
        if entry.name in skip:
            continue
        _link_tree(Path(entry.path), dst / entry.name)


def _build(target: Path) -> None:
    prefix = Path(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    python = target / "python"
    (python / "bin").mkdir(parents=True)
    executable = Path(os.path.realpath(sys.executable))
    _link_tree(executable, python / "bin" / version)
    os.symlink(version, python / "bin" / "python3")
    os.symlink(version, python / "bin" / "python")
    (python / "lib").mkdir()
    libdir = Path(sysconfig.get_config_var("LIBDIR") or prefix / "lib")
    for lib in sorted(libdir.glob("libpython*.so*")):
        _link_tree(lib, python / "lib" / lib.name)
    _link_tree(prefix / "lib" / version, python / "lib" / version, skip=_STDLIB_SKIP)
    (python / "lib" / version / "site-packages").mkdir()
    for profile, dists in PROFILE_DISTRIBUTIONS.items():
        site = target / f"site-{profile}"
        site.mkdir()
        for dist in dists:
            for path in _distribution_paths(dist):
                if not (site / path.name).exists():
                    _link_tree(path, site / path.name)
    for shipped, source in _source_files().items():
        package, name = shipped.split("/")
        (target / "lib" / package).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target / "lib" / package / name)
    (target / "lib" / "_egwire" / "__init__.py").write_text('"""Copy of exactgrade.wire and .values."""\n')
    for dirpath, _dirs, _files in os.walk(target):
        os.chmod(dirpath, 0o755)  # only directories we made: files are hard links to the originals


def ensure_runtime(state_dir: Path | None = None) -> Runtime:
    """Build the runtime tree if missing (once per machine and version; safe across processes)."""
    state = state_dir or default_state_dir()
    root = state / f"runtime-{_key()}"
    if root.is_dir():
        return Runtime(root)
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o711)
    with open(state / ".runtime.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if root.is_dir():
            return Runtime(root)
        partial = state / f".building-{root.name}-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(mode=0o755)
        try:
            _build(partial)
            os.rename(partial, root)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
    return Runtime(root)
