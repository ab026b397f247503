# text_corpus.sh: sourced by the tests that train on text (test_text.sh,
# test_torch.sh, test_tokenizer.sh, ...).  text_corpus DIR: real text for
# them in DIR, made once per build tree and kept: the Linux system-call
# manual pages (Debian's manpages package) rendered to plain text by man(1),
# 80 columns, in the order of their names; where man or the pages are
# missing, the license texts every Debian system has
# (/usr/share/common-licenses).  Sets TEXT_SOURCE to say which.  Tests run
# in parallel: each renders into a folder of its own and renames it to DIR
# (atomic), so a test never sees another's half-made corpus; the first
# rename wins and the others drop theirs.
text_corpus() {
    dir=$1
    if [ ! -f "$dir/done" ]; then
        [ -d "$dir" ] && rm -rf "$dir" # no "done": left half-made by an interrupted run
        tmp="$dir.tmp.$$"
        rm -rf "$tmp" && mkdir -p "$tmp" || return 1
        if command -v man >/dev/null 2>&1 && ls /usr/share/man/man2/*.2.gz >/dev/null 2>&1; then
            for f in $(ls /usr/share/man/man2/*.2.gz | head -200); do
                MANWIDTH=80 man -l "$f" 2>/dev/null | col -b > "$tmp/$(basename "$f" .gz).txt"
            done
            echo "the first 200 pages of section 2 of the man pages, rendered by man" > "$tmp/done"
        else
            cp /usr/share/common-licenses/* "$tmp/" || return 1
            echo "the license texts of /usr/share/common-licenses" > "$tmp/done"
        fi
        mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp" # another test's rename came first
    fi
    [ -f "$dir/done" ] || return 1
    TEXT_SOURCE=$(cat "$dir/done")
}
