"""The notebook faces: the `%uac` magics (magics and their mixins), the widgets, and the marimo
helpers."""
