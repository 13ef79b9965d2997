"""Rules over the typed state: the engine (``@rule``, alerts) and the shipped library."""

from uac_kernel.rules.engine import Alert, Evidence, Finding, Rule, RuleRunner, Severity, rule

__all__ = ["Alert", "Evidence", "Finding", "Rule", "RuleRunner", "Severity", "rule"]
