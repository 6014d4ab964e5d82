#!/usr/bin/env bash
# check-wording.sh — keeps development history and development-environment paths out of the
# user-facing text and the sources: numbered work sessions, "this machine", lent / device
# machines, the development environment's paths, issue numbers as history, "seen here".
# (Two patterns are bracketed so that a plain grep for those paths does not find this file.)
# Usage: scripts/check-wording.sh [PATH...]   (default: README.md docs bench/*.md bench/results include src)
# Prints each offending line (git grep -n) and exits 1 when any is found; 0 and "wording check:
# clean" otherwise. Only files git tracks are searched.
set -uo pipefail
cd "$(dirname "$0")/.."
PATTERN='[Ss]ession [0-9]|[Ss]essions [0-9]|[Tt]his machine|[Dd]evelopment machine|(^|[^[:alpha:]])[Ll]ent([^[:alpha:]]|$)|[Dd]evice machine|/opt/ref[e]nv|/wor[k]/|\(issue [0-9]+|[Ss]een here'
if [ $# -gt 0 ]; then paths=("$@"); else paths=(README.md docs 'bench/*.md' bench/results include src); fi
if git grep -n -I -E "$PATTERN" -- "${paths[@]}"; then
  echo "wording check: the lines above name development history or the development environment" >&2
  exit 1
fi
echo "wording check: clean"
