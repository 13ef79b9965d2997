"""The `uac` command: the entry (main), its parser, and the commands by subject over one Workbench."""
