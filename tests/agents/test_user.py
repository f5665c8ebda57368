"""The reactive user confirms only what it asked for."""
from evosyn.agents.user import ReactiveUser
from evosyn.envs.packs import UserPhrasing


def _user() -> ReactiveUser:
    scenario = {"user_id": "u1", "challenges": [], "identity": "My email is a@example.com.",
                "intents": [{"say": "swap a part of #A100", "tool": "swap",
                             "arguments": {"box_id": "#A100", "pay_id": "card_7", "part_ids": ["9"]}}]}
    return ReactiveUser(scenario, UserPhrasing(identity_words=("email",)))


def test_it_confirms_only_when_every_id_of_one_request_is_named():
    assert _user().respond("I will swap (box id #A100, pay id card_7). Do you confirm?").content.startswith("Yes")
    # one id right and one wrong is not what it asked for
    assert _user().respond("I will swap (box id #A100, pay id card_8). Do you confirm?").content.startswith("No")


def test_it_gives_its_identity_line_when_asked():
    assert "a@example.com" in _user().respond("Could you give me your email?").content


def test_it_gives_the_value_it_left_out_once_when_asked():
    scenario = {"user_id": "driver", "challenges": [], "identity": "I am in my car.",
                "intents": [{"say": "change the temperature", "tool": None, "arguments": {}}],
                "clarify": {"ask": "Which temperature?", "answer": "21 degrees, please."}}
    user = ReactiveUser(scenario, UserPhrasing())
    assert user.respond("Which temperature would you like?").content == "21 degrees, please."
    assert user.respond("Which temperature would you like?").content != "21 degrees, please."  # only once
    assert _user().respond("Which temperature would you like?").content != "21 degrees, please."  # none to give
