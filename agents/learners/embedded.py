"""The embedded learner: a small policy trained by behaviour cloning (-log pi(a|s)) on CPU.

Three logistic models (scikit-learn, log loss), all over agent-visible features:
  action   which next move: a tool call by name, or a reply (ask for the id,
           describe-and-confirm a write, refuse, acknowledge, close);
  write    at a confirmation, which write it is about to propose;
  argument for each argument of a call, which candidate value from the context.
The fitted model is saved with the fingerprint of the trajectories it saw.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.feature_extraction import FeatureHasher, text
from sklearn.linear_model import SGDClassifier

from agents.learners.features import candidate_features, candidates, label_of, schema_candidates, state_tokens
from envs.gold import confirmation_request
from storage.records import Message, ToolCall, Trajectory

WRITE_WORDS = ("book", "cancel", "update", "send", "modify", "return", "exchange")


def fingerprint(trajectories: list[Trajectory]) -> str:
    return hashlib.sha256("\n".join(sorted(t.trajectory_id for t in trajectories)).encode()).hexdigest()[:16]


def _is_write(name: str) -> bool:
    return name.startswith(WRITE_WORDS)


class EmbeddedLearner:
    name = "embedded"

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.state_vec = text.HashingVectorizer(n_features=2 ** 18, alternate_sign=False, token_pattern=r"[^ ]+",
                                                lowercase=False, norm="l2")
        self.arg_vec = FeatureHasher(n_features=2 ** 16, input_type="string", alternate_sign=False)
        self.action = self.write = self.argument = None
        self.constant_action = self.constant_write = None
        self.fingerprint = "untrained"
        self.n_trajectories = 0
        self.tools: dict[str, dict[str, Any]] = {}
        self._pending: ToolCall | None = None

    # ------------------------------------------------------------ training
    def fit(self, trajectories: list[Trajectory], tools: list[dict[str, Any]] | None = None) -> "EmbeddedLearner":
        """Behaviour cloning on verified trajectories; ``tools`` are the OpenAI tool schemas an agent sees."""
        self.tools = {t["function"]["name"]: t["function"] for t in (tools or [])}
        self.fingerprint, self.n_trajectories = fingerprint(trajectories), len(trajectories)
        states, actions, write_states, writes, arg_feats, arg_labels = [], [], [], [], [], []
        for traj in trajectories:
            msgs = traj.messages
            for i, m in enumerate(msgs):
                if m.role != "assistant":
                    continue
                history = msgs[:i]
                label = label_of(m)
                states.append(state_tokens(history))
                actions.append(label)
                if label == "say:confirm":
                    nxt = next((x for x in msgs[i + 1:] if x.tool_calls), None)
                    if nxt is not None:
                        write_states.append(states[-1])
                        writes.append(nxt.tool_calls[0].name)
                if m.tool_calls:
                    self._arg_samples(m.tool_calls[0], history, arg_feats, arg_labels)
        self.action, self.constant_action = self._classifier(states, actions, self.state_vec)
        self.write, self.constant_write = self._classifier(write_states, writes, self.state_vec)
        if arg_labels and len(set(arg_labels)) > 1:
            self.argument = SGDClassifier(loss="log_loss", alpha=1e-6, max_iter=30, tol=None,
                                          random_state=self.seed).fit(self.arg_vec.transform(arg_feats), arg_labels)
        return self

    def _classifier(self, states, labels, vec):
        if not labels:
            return None, None
        if len(set(labels)) == 1:
            return None, labels[0]
        clf = SGDClassifier(loss="log_loss", alpha=1e-6, max_iter=30, tol=None, random_state=self.seed)
        return clf.fit(vec.transform(states), labels), None

    def _arg_candidates(self, tool: str, arg: str, history: list[Message], context: list) -> list:
        props = self.tools.get(tool, {}).get("parameters", {}).get("properties", {})
        return context + schema_candidates(self._resolve(props.get(arg, {})))

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref") or next((x.get("$ref") for x in schema.get("allOf", []) if "$ref" in x), None)
        if ref and self.tools:
            for tool in self.tools.values():
                defs = tool.get("parameters", {}).get("$defs", {})
                if ref.split("/")[-1] in defs:
                    return defs[ref.split("/")[-1]]
        return schema

    def _arg_samples(self, call: ToolCall, history, feats, labels) -> None:
        context = candidates(history)
        used = self._used(history)
        for arg, gold in call.arguments.items():
            target = json.dumps(gold, sort_keys=True)
            for c in self._arg_candidates(call.name, arg, history, context):
                feats.append(candidate_features(call.name, arg, c, used.get(arg, set())))
                labels.append(int(json.dumps(c.value, sort_keys=True) == target))

    @staticmethod
    def _used(history: list[Message]) -> dict[str, set[str]]:
        used: dict[str, set[str]] = {}
        for m in history:
            for c in m.tool_calls:
                for k, v in c.arguments.items():
                    used.setdefault(k, set()).add(json.dumps(v, sort_keys=True))
        return used

    # ------------------------------------------------------------ acting
    def reset(self, tools: list[dict[str, Any]], policy: str) -> None:
        self.tools = {t["function"]["name"]: t["function"] for t in tools} or self.tools
        self._pending = None

    def _predict(self, clf, constant, state: str) -> str | None:
        if clf is None:
            return constant
        return str(clf.predict(self.state_vec.transform([state]))[0])

    def _choose_args(self, tool: str, history: list[Message]) -> dict[str, Any]:
        schema = self.tools.get(tool, {}).get("parameters", {})
        required = schema.get("required", list(schema.get("properties", {})))
        context = candidates(history)
        if self.argument is None:
            return {}
        used = self._used(history)
        args = {}
        for arg in required:
            cands = self._arg_candidates(tool, arg, history, context)
            if not cands:
                continue
            feats = [candidate_features(tool, arg, c, used.get(arg, set())) for c in cands]
            scores = self.argument.predict_proba(self.arg_vec.transform(feats))[:, 1]
            args[arg] = cands[int(np.argmax(scores))].value
        return args

    def act(self, messages: list[Message]) -> Message:
        if self.action is None and self.constant_action is None:  # untrained: it can only hang up
            return Message(role="assistant", content="Goodbye.")
        state = state_tokens(messages)
        label = self._predict(self.action, self.constant_action, state) or "say:close"
        last_user = next((m for m in reversed(messages) if m.role == "user"), None)
        if self._pending is not None and last_user is not None and messages and messages[-1] is last_user:
            said_yes = "yes" in (last_user.content or "").lower() and "no," not in (last_user.content or "").lower()
            if said_yes:  # the user approved exactly the action we described: carry it out
                call, self._pending = self._pending, None
                n = sum(1 for m in messages if m.tool_calls)
                return Message(role="assistant", tool_calls=[call.model_copy(update={"id": f"lc_{n}"})])
            self._pending = None
        if label == "say:ask_id":
            return Message(role="assistant", content="Could you please give me your user id?")
        if label == "say:confirm":
            tool = self._predict(self.write, self.constant_write, state)
            if tool:
                self._pending = ToolCall(id="pending", name=tool, arguments=self._choose_args(tool, messages))
                return Message(role="assistant", content=confirmation_request(tool, self._pending.arguments))
            label = "say:close"
        if label.startswith("tool:"):
            name = label[5:]
            if self._pending is not None and self._pending.name == name:
                args, self._pending = self._pending.arguments, None
            else:
                args = self._choose_args(name, messages)
            n = sum(1 for m in messages if m.tool_calls)
            return Message(role="assistant", tool_calls=[ToolCall(id=f"lc_{n}", name=name, arguments=args)])
        if label == "say:refuse":
            return Message(role="assistant", content="I'm sorry, but I cannot do that under our policy.")
        if label == "say:ack":
            return Message(role="assistant", content="That is done. Is there anything else I can help you with?")
        return Message(role="assistant", content="Everything you asked for is taken care of.")

    # ------------------------------------------------------------ persistence
    def save(self, path: Path) -> Path:
        import joblib

        path.parent.mkdir(parents=True, exist_ok=True)
        joblib.dump(self, path)
        path.with_suffix(".json").write_text(json.dumps(
            {"learner": self.name, "fingerprint": self.fingerprint, "n_trajectories": self.n_trajectories,
             "seed": self.seed}, indent=2))
        return path

    @staticmethod
    def load(path: Path) -> "EmbeddedLearner":
        import joblib

        return joblib.load(path)

