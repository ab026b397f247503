# text_corpus.sh: sourced by the tests that train on text (test_text.sh,
# test_torch.sh).  text_corpus DIR: real text for them in DIR, made once per
# build tree and kept: the Linux system-call manual pages (Debian's
# manpages package) rendered to plain text by man(1), 80 columns, in the
# order of their names; where man or the pages are missing, the license
# texts every Debian system has (/usr/share/common-licenses).  Sets
# TEXT_SOURCE to say which.
text_corpus() {
    dir=$1
    if [ -f "$dir/done" ]; then
        TEXT_SOURCE=$(cat "$dir/done")
        return 0
    fi
    rm -rf "$dir" && mkdir -p "$dir" || return 1
    if command -v man >/dev/null 2>&1 && ls /usr/share/man/man2/*.2.gz >/dev/null 2>&1; then
        for f in $(ls /usr/share/man/man2/*.2.gz | head -200); do
            MANWIDTH=80 man -l "$f" 2>/dev/null | col -b > "$dir/$(basename "$f" .gz).txt"
        done
        TEXT_SOURCE="the first 200 pages of section 2 of the man pages, rendered by man"
    else
        cp /usr/share/common-licenses/* "$dir/" || return 1
        TEXT_SOURCE="the license texts of /usr/share/common-licenses"
    fi
    echo "$TEXT_SOURCE" > "$dir/done"
}
