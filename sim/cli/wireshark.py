"""``lossless wireshark-plugin``: where the generated Wireshark Lua dissector is, how to use it.

Prints the path of ``lossless_scaleup.lua`` (shipped inside the ``wire`` package) and how to
load it; ``--install`` copies it into the personal Wireshark plugin folder
(``~/.local/lib/wireshark/plugins/``, where Wireshark and tshark load Lua plugins from at
start-up); ``--print`` writes the Lua source to stdout.

Wired into :mod:`sim.cli` with ``wireshark_cmd.add_parser(sub)``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

__all__ = ["LUA_NAME", "add_parser", "cmd_wireshark_plugin", "lua_path", "plugin_dir"]

LUA_NAME = "lossless_scaleup.lua"
EXIT_OK, EXIT_FAIL = 0, 2


def lua_path() -> Path:
    """The installed copy of the generated dissector (inside the ``wire`` package)."""
    import wire

    return Path(wire.__file__).resolve().parent / "wireshark" / LUA_NAME


def plugin_dir() -> Path:
    """Wireshark's personal plugin folder (Linux/macOS): Lua files there load at start-up."""
    return Path.home() / ".local" / "lib" / "wireshark" / "plugins"


def _instructions(path: Path, target: Path) -> str:
    return f"""\
Wireshark dissector for ESUN, SUNH, AFH and SUE (generated from the lossless field tables):
  {path}

Use it for one run:
  tshark -X lua_script:{path} -r capture.pcap
  wireshark -X lua_script:{path} capture.pcap
Install it for every run (copies to {target}/):
  lossless wireshark-plugin --install
Every EtherType, port and protocol number is a placeholder; set yours with preferences
(Edit > Preferences > Protocols in Wireshark), e.g.:
  tshark -X lua_script:{path} -o esun.ethertype:0x88B5 -o sunh.ethertype:0x88B6 \\
         -o afh.gen1_ethertype:0x9A00 -o afh.sue_ethertype:0x9A01 -o sue_rh.udp_port:0xCAFE \\
         -o afh.gen2_form:12 -o sue_txn.hdr_bytes:8 -o esun.transport:sue_rh -r capture.pcap
Display filters use the names of `lossless decode -f jsonl`: esun.cos, sue_rh.npsn,
sue_txn.opcode, rcrc.valid == 0 ... (see wire/wireshark/README.md)."""


def cmd_wireshark_plugin(args: argparse.Namespace) -> int:
    path = lua_path()
    if not path.is_file():
        print(f"lossless: {path} is missing from this installation "
              f"(python -m wire.wireshark_gen --write regenerates it)", file=sys.stderr)
        return EXIT_FAIL
    if args.print_source:
        sys.stdout.write(path.read_text(encoding="utf-8"))
        return EXIT_OK
    target = Path(args.plugin_dir).expanduser() if args.plugin_dir else plugin_dir()
    if args.install:
        try:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target / LUA_NAME)
        except OSError as e:
            print(f"lossless: cannot install into {target}: {e}", file=sys.stderr)
            return EXIT_FAIL
        print(f"installed {target / LUA_NAME}")
        print("restart Wireshark (or run tshark) to load it; check with: "
              "tshark -G protocols | grep -w sue_rh")
        return EXIT_OK
    print(_instructions(path, target))
    return EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``wireshark-plugin`` command to ``lossless``'s sub-command parsers."""
    p = subparsers.add_parser(
        "wireshark-plugin", help="the Wireshark Lua dissector for the scale-up headers",
        description="Print where the generated Wireshark Lua dissector for ESUN, SUNH, AFH "
                    "and SUE is and how to load it; --install copies it into the personal "
                    "plugin folder, --print writes its source.")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--install", action="store_true",
                      help="copy it into ~/.local/lib/wireshark/plugins/")
    mode.add_argument("--print", dest="print_source", action="store_true",
                      help="write the Lua source to stdout")
    p.add_argument("--plugin-dir", metavar="DIR",
                   help="install into DIR instead of ~/.local/lib/wireshark/plugins/")
    p.set_defaults(func=cmd_wireshark_plugin)
    return p
