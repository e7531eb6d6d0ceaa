"""``otel-loopguard assets``: write the Grafana dashboard and the Prometheus rules to a directory.

The files ship inside the package (``otel_loopguard/assets/``), so an installed otel-loopguard
can hand them out without a checkout of the repository: ``loopguard.json`` (the dashboard),
``alerts.yaml`` (recording and alerting rules) and ``alerts_test.yaml`` (their ``promtool test
rules`` unit tests).
"""

from __future__ import annotations

import argparse
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any, Final

from otel_loopguard.exceptions import LoopGuardError

__all__ = ["add_parser", "asset_files"]

_SUFFIXES: Final = (".json", ".yaml")


def add_parser(commands: Any) -> None:
    """Register ``assets`` on the subcommand parser."""
    parser = commands.add_parser(
        "assets", help="write the Grafana dashboard and the Prometheus rules to a directory",
        description="Write the files that ship with otel-loopguard: loopguard.json (Grafana "
                    "dashboard), alerts.yaml (Prometheus recording and alerting rules) and "
                    "alerts_test.yaml (their promtool unit tests). Exit 0 when written, 2 when "
                    "a file exists with other content (give --force) or cannot be written.")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--output", "-o", metavar="DIR",
                        help="directory to write into (created when missing)")
    target.add_argument("--list", action="store_true", help="print the file names and exit")
    parser.add_argument("--force", action="store_true",
                        help="overwrite files that exist with other content")
    parser.set_defaults(handler=run_assets)


def asset_files() -> dict[str, bytes]:
    """Return the content of each shipped asset file by name, sorted by name."""
    folder = files("otel_loopguard").joinpath("assets")
    found = [f for f in folder.iterdir() if f.is_file() and f.name.endswith(_SUFFIXES)]
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
    if not args.force:
        clashes = [name for name, data in contents.items()
                   if (output / name).exists() and (output / name).read_bytes() != data]
        if clashes:
            raise LoopGuardError(f"{output / clashes[0]} exists with other content; "
                              "give --force to overwrite it")
    try:
        output.mkdir(parents=True, exist_ok=True)
        for name, data in contents.items():
            (output / name).write_bytes(data)
    except OSError as exc:
        raise LoopGuardError(f"cannot write to {output}: {exc.strerror}") from None
    for name in contents:
        print(output / name)
    print(f"otel-loopguard: wrote {len(contents)} files to {output}", file=sys.stderr)
    return 0
