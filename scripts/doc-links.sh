#!/usr/bin/env bash
# Checks that every relative Markdown link in README.md and docs/*.md resolves: the file it names
# exists, and the heading its #anchor names is in that file (GitHub's anchors: the heading's text
# lower-cased, everything but letters, digits, spaces, hyphens and underscores dropped, spaces
# made hyphens, "-1", "-2", ... after a repeated one). Links to web pages are not followed. Run
# from anywhere; ctest runs it as Docs.LinksResolve.
#
#   bash scripts/doc-links.sh [FILE.md...]      # default: README.md docs/*.md
#
# Prints one line per broken link (file:line: target: why). Exit codes: 0 all resolve; 1 some do
# not, or a file named cannot be read.
#
# What it reads: inline links `[text](target)` whose `](target)` is on one line, outside code
# spans and ``` fences; ATX headings (`## ...`) at the start of a line. Not: reference-style
# links, targets with a title or in <...>, setext headings, ~~~ or indented fences. Its slugs keep
# every non-ASCII character, where GitHub drops symbols such as an em dash: an anchor of such a
# heading is reported as missing rather than passed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
docs=()
for arg in "$@"; do
  docs+=("$(realpath -m -- "$arg")")
done
cd "$root"
if ((${#docs[@]} == 0)); then
  docs=(README.md docs/*.md)
fi

# The anchors of one Markdown file, one per line (headings inside ``` fences are not headings).
anchors() {
  awk '
    /^```/ { fenced = !fenced; next }
    fenced || !/^#+ / { next }
    {
      text = $0
      sub(/^#+ +/, "", text)
      text = tolower(text)
      slug = ""
      for (i = 1; i <= length(text); i++) {
        c = substr(text, i, 1)
        if (c ~ /[a-z0-9_-]/ || c > "\177") slug = slug c
        else if (c == " ") slug = slug "-"
      }
      n = seen[slug]++
      print (n ? slug "-" n : slug)
    }
  ' "$1"
}

# Each target file's anchors, worked out once: measure.md alone is the target of a hundred links.
declare -A anchors_of=()
has_anchor() {
  [[ -v "anchors_of[$1]" ]] || anchors_of[$1]=$(anchors "$1")
  grep -qxF -- "$2" <<<"${anchors_of[$1]}"
}

status=0
for doc in "${docs[@]}"; do
  if [[ ! -f "$doc" || ! -r "$doc" ]]; then
    echo "$doc: cannot be read" >&2
    status=1
    continue
  fi
  dir=$(dirname "$doc")
  # file:line:target for every inline link outside code fences and code spans.
  while IFS=$'\t' read -r line target; do
    file=${target%%#*}
    anchor=
    [[ "$target" == *"#"* ]] && anchor=${target#*#}
    if [[ -z "$file" ]]; then
      path=$doc
    else
      path="$dir/$file"
    fi
    if [[ ! -e "$path" ]]; then
      echo "$doc:$line: $target: no such file" >&2
      status=1
      continue
    fi
    if [[ -n "$anchor" && "$path" == *.md ]] && ! has_anchor "$path" "$anchor"; then
      echo "$doc:$line: $target: no heading with that anchor in $path" >&2
      status=1
    fi
  done < <(awk '
    /^```/ { fenced = !fenced; next }
    fenced { next }
    {
      text = $0
      gsub(/`[^`]*`/, "", text)
      while (match(text, /\]\([^) ]+\)/)) {
        target = substr(text, RSTART + 2, RLENGTH - 3)
        text = substr(text, RSTART + RLENGTH)
        if (target !~ /^[a-z]+:/) print NR "\t" target
      }
    }
  ' "$doc")
done
exit "$status"
