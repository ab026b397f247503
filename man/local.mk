# man pages
