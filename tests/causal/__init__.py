"""Tests of neurips26.causal (a package, so that its test_bad_input module does not collide with the other fields')."""
