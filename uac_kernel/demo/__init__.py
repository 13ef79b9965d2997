"""The seeded synthetic demo user (life and its timeline, stories, spending, days), its recorded
chat (chat) and the offline demo run (run)."""
