"""What several test files share, by subject: a test file imports it from here, never from another test file."""
