"""The reactive user confirms only what it asked for."""
from agents.user import ReactiveUser
from envs.packs import UserPhrasing


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
