"""One compiler module a constraint kind; each defines ``compile(name, c) -> Rule``."""
