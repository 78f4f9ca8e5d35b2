#!/usr/bin/env bash
# Rewrites the code's citations of the external behaviour reference ("reference §4.4",
# "§5.5", "(A7)", "seed §10.4", …) into citations of the repository's own design notes
# ("docs/resolution.md §4.4", …), using the mapping in docs/citations.tsv
# (<old text>TAB<new text>, applied top to bottom, most specific forms first).
#
# Usage: docs/apply-citations.sh [REPO_ROOT]      (default: the repository holding this script)
#
# - Only comment lines of Rust files are touched (lines whose first non-blank characters
#   are //, i.e. //, /// and //! comments); README.md is rewritten as prose.
# - Files: src tests e2e examples (*.rs) and README.md. Files that do not change are not
#   rewritten (no mtime change, no rebuild).
# - Idempotent: "§" already preceded by "<something>.md " — and further "§…" in the same
#   parenthesised list, e.g. "(docs/catalogs.md §2.2, §9.1)" — is masked before the rules
#   run, so converted citations are never converted again.
# - A rule whose old text ends in a digit only matches when no further digit or ".digit"
#   follows ("§2" does not match "§2.1"; "§1" would not match "RFC 9110 §13.2.2").
# - At the end it lists citations that no rule covered, for a manual look.
set -euo pipefail
export LC_ALL=C

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="${1:-$(cd "$here/.." && pwd)}"
tsv="$here/citations.tsv"
cd "$root"

M=$'\x01'   # mask for a "§" that must not be rewritten (restored at the end)

ere_escape() { printf '%s' "$1" | sed -e 's/[][\\/.*^$()+?{}|]/\\&/g'; }
repl_escape() { printf '%s' "$1" | sed -e 's/[\\/&]/\\&/g'; }

rules="$(mktemp)"
prog_rs="$(mktemp)"
prog_md="$(mktemp)"
trap 'rm -f "$rules" "$prog_rs" "$prog_md"' EXIT

while IFS=$'\t' read -r old new; do
  [ -n "$old" ] || continue
  case "$old" in \#*) continue ;; esac
  old_m="${old//.md §/.md $M}"          # old text as it looks after masking
  pat="$(ere_escape "$old_m")"
  rep="$(repl_escape "$new")"
  rep="${rep//§/$M}"                    # new citations are born masked
  if [[ "$old" =~ [0-9]$ ]]; then
    printf 's/%s($|[^.0-9]|\\.$|\\.[^0-9])/%s\\1/g\n' "$pat" "$rep" >>"$rules"
  else
    printf 's/%s/%s/g\n' "$pat" "$rep" >>"$rules"
  fi
done <"$tsv"

body() {
  printf 's/\\.md §/.md %s/g\n' "$M"
  printf ':m\n'
  printf 's/(\\.md [%sA][^)§]*), §/\\1, %s/\n' "$M" "$M"
  printf 'tm\n'
  cat "$rules"
  printf 's/%s/§/g\n' "$M"
}
{ printf '/^[[:space:]]*\\/\\//{\n'; body; printf '}\n'; } >"$prog_rs"
body >"$prog_md"

changed=0
rewrite() {   # file program
  local f="$1" prog="$2" tmp
  tmp="$(mktemp)"
  sed -E -f "$prog" "$f" >"$tmp"
  if ! cmp -s "$f" "$tmp"; then
    cat "$tmp" >"$f"
    echo "rewrote $f"
    changed=$((changed + 1))
  fi
  rm -f "$tmp"
}

while IFS= read -r -d '' f; do
  rewrite "$f" "$prog_rs"
done < <(find src tests e2e examples -name '*.rs' -type f -print0 2>/dev/null | sort -z)
[ -f README.md ] && rewrite README.md "$prog_md"
echo "$changed file(s) rewritten"

# Citations no rule covered (new comments, re-wrapped lines): look at these by hand.
left="$(grep -rnE 'reference (§|A[0-9])|seed[^ ]* §|(^|[^.0-9a-z/])§[0-9]|\(A[0-9]\)' \
          src tests e2e examples README.md 2>/dev/null \
        | grep -vE '\.md (§|A[0-9])|RFC [0-9]+ §' || true)"
if [ -n "$left" ]; then
  echo "citations left for a manual look:"
  printf '%s\n' "$left"
fi
