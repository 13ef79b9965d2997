"""Every command declared once (name, arguments, help, faces, the renderer of its report): the `uac` parser and the `%uac` parsers are built from it."""
