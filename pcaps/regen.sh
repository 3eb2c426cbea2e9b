#!/bin/sh
# Rebuild every reference capture from the JSON Lines file next to it.
# Run from the repository root after editing a pcaps/*.jsonl:   sh pcaps/regen.sh
# tests/test_cli.py checks that the committed pcaps are exactly what this makes.
set -e
for src in pcaps/*.jsonl; do
  lossless craft "$src" -o "${src%.jsonl}.pcap" -q
done
# Native InfiniBand captures (linktype 247, ERF 197): tests/test_ib_wire.py checks them.
for src in pcaps/ib/*.jsonl; do
  lossless craft "$src" -o "${src%.jsonl}.pcap" -q
done
