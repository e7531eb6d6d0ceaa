"""``otel-loopguard assets``: write the Grafana dashboard and the Prometheus rules to a directory.

The files are kept in the repository's top-level ``dashboards/`` folder; the wheel carries
copies of them as ``otel_loopguard/assets/`` (made at build time, ``pyproject.toml``), so an
installed otel-loopguard can hand them out without a checkout of the repository:
``loopguard.json`` (the dashboard), ``alerts.yaml`` (recording and alerting rules) and
``alerts_test.yaml`` (their ``promtool test rules`` unit tests). Run from a source checkout,
where the package has no copies, the command reads ``dashboards/`` itself.
"""

from __future__ import annotations

import argparse
import sys
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from otel_loopguard.exceptions import LoopGuardError

if TYPE_CHECKING:
    from importlib.abc import Traversable

__all__ = ["add_parser", "asset_files", "assets_folder"]

_SUFFIXES: Final = (".json", ".yaml")


def add_parser(commands: Any) -> None:
    """Register ``assets`` on the subcommand parser."""
    parser = commands.add_parser(
        "assets", help="write the Grafana dashboard and the Prometheus rules to a directory",
        description="Write the files that ship with otel-loopguard: loopguard.json (Grafana "
                    "dashboard), alerts.yaml (Prometheus recording and alerting rules) and "
                    "alerts_test.yaml (their promtool unit tests). Files already up to date are "
                    "left alone. Exit 0 when written or up to date, 2 when a file exists with "
                    "other content (give --force) or cannot be written.")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--output", "-o", metavar="DIR",
                        help="directory to write into (created when missing)")
    target.add_argument("--list", action="store_true", help="print the file names and exit")
    parser.add_argument("--force", action="store_true",
                        help="overwrite files that exist with other content")
    parser.set_defaults(handler=run_assets)


def assets_folder() -> Traversable:
    """Return where the dashboard and rules are: the package's copies, else ``dashboards/``.

    Raises:
        LoopGuardError: when neither exists (a package built without its assets).
    """
    shipped = files("otel_loopguard").joinpath("assets")
    if shipped.is_dir():
        return shipped
    checkout = Path(__file__).resolve().parents[2] / "dashboards"
    if (checkout / "loopguard.json").is_file():
        return checkout
    raise LoopGuardError("this installation has no dashboard and rules (otel_loopguard/assets "
                         "is missing); reinstall otel-loopguard from a wheel")


def asset_files() -> dict[str, bytes]:
    """Return the content of each shipped asset file by name, sorted by name."""
    found = [f for f in assets_folder().iterdir() if f.is_file() and f.name.endswith(_SUFFIXES)]
    return {f.name: f.read_bytes() for f in sorted(found, key=lambda f: f.name)}


def run_assets(args: argparse.Namespace) -> int:
    """Write (or list) the asset files; return the exit code.

    Raises:
        LoopGuardError: when a file exists with other content and ``--force`` is not given, or
            when the directory cannot be written.
    """
    contents = asset_files()
    if args.list:
        print("\n".join(contents))
        return 0
    output = Path(args.output)
    if output.exists() and not output.is_dir():
        raise LoopGuardError(f"{output}: not a directory (-o names the directory to write the "
                             "files in)")
    current = {name for name, data in contents.items()
               if (output / name).is_file() and (output / name).read_bytes() == data}
    clashes = [name for name in contents if name not in current and (output / name).exists()]
    if clashes and not args.force:
        raise LoopGuardError(f"{output / clashes[0]} exists with other content; "
                             "give --force to overwrite it")
    try:
        output.mkdir(parents=True, exist_ok=True)
        for name, data in contents.items():
            if name not in current:
                (output / name).write_bytes(data)
    except OSError as exc:
        raise LoopGuardError(f"cannot write to {output}: {exc.strerror}") from None
    for name in contents:
        print(output / name)
    print(f"otel-loopguard: {_outcome(len(contents) - len(current), len(current), output)}",
          file=sys.stderr)
    return 0


def _outcome(written: int, unchanged: int, output: Path) -> str:
    """Return what was done: ``wrote 3 files to DIR``, ``... (1 unchanged)``, or nothing."""
    if not written:
        return f"nothing changed: the {unchanged} files in {output} are up to date"
    noun = "file" if written == 1 else "files"
    return f"wrote {written} {noun} to {output}" + (f" ({unchanged} unchanged)" if unchanged
                                                    else "")
