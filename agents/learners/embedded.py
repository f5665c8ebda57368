"""The embedded learner: a small policy trained by behaviour cloning (-log pi(a|s)) on CPU.

Three logistic models (scikit-learn, log loss), all over agent-visible features:
  action   which next move: a tool call by name, or a reply (ask for the id,
           describe-and-confirm a write, refuse, acknowledge, close);
  write    at a confirmation, which write it is about to propose;
  argument for each argument of a call, which candidate value from the context;
  report   at the closing message, which values from the context to tell the user.
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

from agents.learners.features import (Candidate, Scene, candidate_features, candidates, label_of, schema_candidates,
                                      state_tokens)
from envs.gold import confirmation_request
from storage.atomic import atomic_path, write_json
from storage.faults import kill_point
from storage.records import Message, ToolCall, Trajectory


def fingerprint(trajectories: list[Trajectory]) -> str:
    return hashlib.sha256("\n".join(sorted(t.trajectory_id for t in trajectories)).encode()).hexdigest()[:16]


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), "null")


def _json_types(schema: dict[str, Any]) -> set[str]:
    """The JSON types an argument accepts (all of them when the schema does not say)."""
    found: set[str] = set()
    for s in [schema] + schema.get("anyOf", []) + schema.get("oneOf", []):
        t = s.get("type")
        for name in (t if isinstance(t, list) else [t] if t else []):
            found.add("number" if name in ("integer", "number") else name)
        if "enum" in s:
            found.add("string")
    return found or {"boolean", "number", "string", "array", "object", "null"}


def _render(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _norm(text: str) -> str:
    return " " + " ".join(text.lower().replace(",", "").replace(";", " ").rstrip(".").split()) + " "




class EmbeddedLearner:
    name = "embedded"

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.state_vec = text.HashingVectorizer(n_features=2 ** 18, alternate_sign=False, token_pattern=r"[^ ]+",
                                                lowercase=False, norm="l2")
        self.arg_vec = FeatureHasher(n_features=2 ** 16, input_type="string", alternate_sign=False)
        self.action = self.write = self.argument = self.report = None
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
        report_feats, report_labels = [], []
        for traj in trajectories:
            msgs = traj.messages
            for i, m in enumerate(msgs):
                if m.role != "assistant":
                    continue
                history = msgs[:i]
                scene = Scene.of(history)  # one per decision: the state, the arguments and the report share it
                label = label_of(m)
                states.append(state_tokens(history, scene))
                actions.append(label)
                if label == "say:confirm":
                    nxt = next((x for x in msgs[i + 1:] if x.tool_calls), None)
                    if nxt is not None:
                        write_states.append(states[-1])
                        writes.append(nxt.tool_calls[0].name)
                if m.tool_calls:
                    self._arg_samples(m.tool_calls[0], history, scene, arg_feats, arg_labels)
                elif label == "say:close":
                    said = _norm(m.content or "")
                    for c, feats in self._report_candidates(history, scene):
                        report_feats.append(feats)
                        report_labels.append(int(_norm(_render(c.value)) in said))
        self.action, self.constant_action = self._classifier(states, actions, self.state_vec)
        self.write, self.constant_write = self._classifier(write_states, writes, self.state_vec)
        self.argument = self._binary(arg_feats, arg_labels)
        self.report = self._binary(report_feats, report_labels)
        return self

    def _binary(self, feats, labels):
        if not labels or len(set(labels)) < 2:
            return None
        clf = SGDClassifier(loss="log_loss", alpha=1e-6, max_iter=15, tol=None, random_state=self.seed)
        return clf.fit(self.arg_vec.transform(feats), labels)

    def _report_candidates(self, history: list[Message], scene: Scene) -> list[tuple[Candidate, list[str]]]:
        """Scalar values from observations (and what was derived from them) that a closing could report."""
        out = []
        for c in candidates(history, scene.dlg):
            if c.source in ("obs", "derived") and isinstance(c.value, (str, int, float)) and not isinstance(
                    c.value, bool) and len(_render(c.value)) <= 24:
                out.append((c, candidate_features("report", "info", c, set(), scene)))
        return out

    def _classifier(self, states, labels, vec):
        if not labels:
            return None, None
        if len(set(labels)) == 1:
            return None, labels[0]
        clf = SGDClassifier(loss="log_loss", alpha=1e-6, max_iter=15, tol=None, random_state=self.seed)
        return clf.fit(vec.transform(states), labels), None

    def _arg_candidates(self, tool: str, arg: str, history: list[Message], context: list) -> list:
        props = self.tools.get(tool, {}).get("parameters", {}).get("properties", {})
        schema = self._resolve(props.get(arg, {}))
        kinds = _json_types(schema)
        return [c for c in context if _json_type(c.value) in kinds] + schema_candidates(schema)

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        ref = schema.get("$ref") or next((x.get("$ref") for x in schema.get("allOf", []) if "$ref" in x), None)
        if ref and self.tools:
            for tool in self.tools.values():
                defs = tool.get("parameters", {}).get("$defs", {})
                if ref.split("/")[-1] in defs:
                    return defs[ref.split("/")[-1]]
        return schema

    def _arg_samples(self, call: ToolCall, history, scene: Scene, feats, labels) -> None:
        context = candidates(history, scene.dlg)
        used = self._used(history)
        for arg, gold in call.arguments.items():
            target = json.dumps(gold, sort_keys=True)
            for c in self._arg_candidates(call.name, arg, history, context):
                feats.append(candidate_features(call.name, arg, c, used.get(arg, set()), scene))
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

    def _choose_args(self, tool: str, history: list[Message], scene: Scene) -> dict[str, Any]:
        schema = self.tools.get(tool, {}).get("parameters", {})
        required = schema.get("required", list(schema.get("properties", {})))
        if self.argument is None:
            return {}
        context = candidates(history, scene.dlg)
        used = self._used(history)
        args = {}
        for arg in required:
            cands = self._arg_candidates(tool, arg, history, context)
            if not cands:
                continue
            feats = [candidate_features(tool, arg, c, used.get(arg, set()), scene) for c in cands]
            scores = self.argument.predict_proba(self.arg_vec.transform(feats))[:, 1]
            args[arg] = cands[int(np.argmax(scores))].value
        return args

    def act(self, messages: list[Message]) -> Message:
        if self.action is None and self.constant_action is None:  # untrained: it can only hang up
            return Message(role="assistant", content="Goodbye.")
        scene = Scene.of(messages)
        state = state_tokens(messages, scene)
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
                self._pending = ToolCall(id="pending", name=tool, arguments=self._choose_args(tool, messages, scene))
                return Message(role="assistant", content=confirmation_request(tool, self._pending.arguments))
            label = "say:close"
        if label.startswith("tool:"):
            name = label[5:]
            if self._pending is not None and self._pending.name == name:
                args, self._pending = self._pending.arguments, None
            else:
                args = self._choose_args(name, messages, scene)
            n = sum(1 for m in messages if m.tool_calls)
            return Message(role="assistant", tool_calls=[ToolCall(id=f"lc_{n}", name=name, arguments=args)])
        if label == "say:refuse":
            return Message(role="assistant", content="I'm sorry, but I cannot do that under our policy.")
        if label == "say:ack":
            return Message(role="assistant", content="That is done. Is there anything else I can help you with?")
        return Message(role="assistant", content="Everything you asked for is taken care of." + self._records(messages, scene))

    def _records(self, messages: list[Message], scene: Scene) -> str:
        if self.report is None:
            return ""
        cands = self._report_candidates(messages, scene)
        if not cands:
            return ""
        scores = self.report.predict_proba(self.arg_vec.transform([f for _, f in cands]))[:, 1]
        values = list(dict.fromkeys(_render(c.value) for (c, _), p in zip(cands, scores) if p > 0.5))
        return f" For your records: {'; '.join(values)}." if values else ""

    # ------------------------------------------------------------ persistence
    def save(self, path: Path) -> Path:
        """The model (joblib) and its JSON sidecar, each written atomically: a crash leaves the old file or none."""
        import joblib

        with atomic_path(path) as tmp:
            joblib.dump(self, tmp)
            kill_point("train")
        write_json(path.with_suffix(".json"), {"learner": self.name, "fingerprint": self.fingerprint,
                                               "n_trajectories": self.n_trajectories, "seed": self.seed}, indent=2)
        return path

    @staticmethod
    def load(path: Path) -> "EmbeddedLearner":
        import joblib

        learner = joblib.load(path)
        if not isinstance(learner, EmbeddedLearner):
            raise TypeError(f"{path} holds a {type(learner).__name__}, not an EmbeddedLearner")
        return learner

