"""The wheel carries every file the package reads (issue 26): each data file under symbolic/ — the
repository's derivations/ through the symbolic/derivations link included — matches pyproject's
package-data, so a wheel installed outside the clone has the models, hardware, calculator page,
claims, golden files and published runs (``scripts/check_wheel`` builds and runs one)."""
import os
import tomllib
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "symbolic"


def package_data() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["symbolic"]


def data_files() -> list[str]:
    out = []
    for folder, dirs, files in os.walk(PACKAGE, followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        out += [str((Path(folder) / name).relative_to(PACKAGE)) for name in files
                if not name.endswith((".py", ".pyc"))]
    return out


def test_every_data_file_is_package_data():
    patterns = package_data()
    missing = [path for path in data_files() if not any(fnmatch(path, pattern) for pattern in patterns)]
    assert missing == []


def test_the_claims_reach_the_package():
    """symbolic/derivations is the repository's derivations/ (a link), which a wheel holds as a copy."""
    files = data_files()
    assert (PACKAGE / "derivations").resolve() == (ROOT / "derivations").resolve()
    assert "derivations/korthikanti.toml" in files and "derivations/throughput/public.json" in files
    assert sum(path.startswith("derivations/") for path in files) == len(list((ROOT / "derivations").rglob("*.*")))


def test_the_version_is_written_once():
    """pyproject.toml holds the version; the package reads none of its own."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    texts = [path.read_text() for path in PACKAGE.rglob("*.py")]
    assert version and not any("__version__ =" in text for text in texts)
