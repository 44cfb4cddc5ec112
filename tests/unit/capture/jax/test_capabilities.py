"""``_capture._jax._capabilities``: what each fact read off JAX internals costs when lost."""

from __future__ import annotations

from otel_jax._capture._jax._capabilities import Capability, Unavailable, unavailable_message


def test_every_capability_says_what_is_reported_without_it():
    for capability in Capability:
        assert capability.lost and capability.value == capability.name.lower()


def test_the_warning_names_what_is_lost_and_which_internal_moved():
    message = unavailable_message("9.9", [
        Unavailable(Capability.PROGRAM_FINGERPRINTS, "no jax._src.cache_key")])
    assert message.startswith("otel_jax: on jax 9.9 some facts are unavailable: ")
    assert "program fingerprints (none) [no jax._src.cache_key]" in message
    assert "Compile counts, durations and phases are kept" in message


def test_transformed_causes_are_not_said_again_when_all_causes_are_lost():
    both = [Unavailable(Capability.CAUSES, "a"), Unavailable(Capability.TRANSFORMED_CAUSES, "b")]
    assert "[b]" not in unavailable_message("9.9", both)
    assert "[b]" in unavailable_message("9.9", both[1:])
