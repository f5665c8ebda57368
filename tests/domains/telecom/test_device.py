"""The phone's speed test, read from tau2's public ``run_speed_test`` tool: tau2's own speed, exactly."""
from __future__ import annotations

import math

import pytest

from evosyn.domains.telecom.device import speed_test

STATES = [[], [("turn_data_saver_mode_on", {})], [("set_network_mode_preference", {"mode": "2g_only"})],
          [("set_network_mode_preference", {"mode": "3g_only"}), ("turn_data_saver_mode_on", {})]]


@pytest.mark.parametrize("calls", STATES)
def test_the_speed_read_is_tau2s_own_to_the_last_bit(telecom, calls):
    user = telecom.episode().env.user_tools
    for func, arguments in calls:
        getattr(user, func)(**arguments)
    speed, desc = speed_test(user)
    assert type(speed) is float and desc in ("Very Poor", "Poor", "Fair", "Good", "Excellent")
    # tau2's assertion compares its own speed with ``>=``: it holds at ours and fails at the next float up,
    # so ours is tau2's exactly (what a task's assert_internet_speed is built from)
    assert user.assert_internet_speed(speed, desc)
    assert not user.assert_internet_speed(math.nextafter(speed, math.inf), desc)


def test_without_mobile_data_there_is_no_speed(telecom):
    user = telecom.episode().env.user_tools
    user.turn_airplane_mode_on()
    assert speed_test(user) == (None, "No Connection")
    assert user.assert_mobile_data_status(False)


def test_a_speed_text_of_another_form_raises():
    class Tools:
        def run_speed_test(self) -> str:
            return "Download: 220 Mbps"

    with pytest.raises(ValueError, match="run_speed_test said"):
        speed_test(Tools())
