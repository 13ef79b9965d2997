"""The model layer: the client and its call record (client), extraction of facts (extract,
pipeline), review of held answers (review), and answers by code (ask)."""
