"""Command line: ``python -m xpgrad info`` reports the version, the array API version,
the supported backends (installed or not, version, devices) and the current policy;
``python -m xpgrad demo`` trains a digit classifier on any backend (see ``xpgrad._demo``).

Each subcommand is a subparser whose ``func`` default does the work, so a new
subcommand is one ``add_parser`` call and one function.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Sequence
from typing import Any

import xpgrad
from xpgrad._backends import backend_info, library_of

from ._demo import add_demo_parser

__all__ = ["build_parser", "info_report", "main"]


def info_report() -> dict[str, Any]:
    """Everything ``xpgrad info`` prints, as a JSON-ready dict.

    Examples:
        >>> from xpgrad.__main__ import info_report
        >>> r = info_report()
        >>> r["array_api_version"], r["policy"]["library"]
        ('2025.12', 'numpy')
    """
    p = xpgrad.current_policy()
    return {
        "xpgrad": xpgrad.__version__,
        "array_api_version": xpgrad.__array_api_version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "backends": backend_info(),
        "policy": {
            "library": library_of(p.xp),
            "namespace": p.xp.__name__,
            "device": None if p.device is None else str(p.device),
            "dtype": p.dtype,
            "seed": p.seed,
        },
    }


def _print_info(report: dict[str, Any]) -> None:
    print(f"xpgrad {report['xpgrad']} (array API standard {report['array_api_version']})")
    print(f"python {report['python']} on {report['platform']}")
    print()
    print("backends:")
    width = max(len(b["library"]) for b in report["backends"])
    for b in report["backends"]:
        if not b["installed"]:
            state = f'not installed (pip install "xpgrad[{b["extra"]}]")'
        elif "error" in b:
            state = f"{b['version']}, broken: {b['error']}"
        else:
            state = f"{b['version']}, devices: {', '.join(b['devices']) or '-'}"
        print(f"  {b['library']:<{width}}  {state}")
    print()
    pol = report["policy"]
    print("current policy:")
    print(f"  namespace  {pol['namespace']} ({pol['library']})")
    print(f"  device     {pol['device'] if pol['device'] is not None else 'library default'}")
    print(f"  dtype      {pol['dtype'] if pol['dtype'] is not None else 'backend default'}")
    print(f"  seed       {pol['seed'] if pol['seed'] is not None else 'none (OS entropy)'}")


def _cmd_info(args: argparse.Namespace) -> int:
    report = info_report()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_info(report)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser: one subparser per subcommand, each with ``func`` set.

    Examples:
        >>> from xpgrad.__main__ import build_parser
        >>> build_parser().parse_args(["info", "--json"]).json
        True
    """
    parser = argparse.ArgumentParser(
        prog="python -m xpgrad",
        description="xpgrad: automatic differentiation for any array API array.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    info = sub.add_parser("info", help="versions, backends and their devices, current policy")
    info.add_argument("--json", action="store_true", help="print the report as JSON")
    info.set_defaults(func=_cmd_info)
    add_demo_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    Examples:
        >>> from xpgrad.__main__ import main
        >>> main(["info", "--json"])  # doctest: +ELLIPSIS
        {
          "xpgrad": "...",
        ...
        0
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
