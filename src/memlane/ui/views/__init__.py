"""One module per page: each turns a request into the library calls it needs and a
template; :mod:`.errors` renders what went wrong as a page."""
