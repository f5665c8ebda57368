"""The embedded learner: a small policy trained by behaviour cloning (-log pi(a|s)) on CPU.

Logistic models (scikit-learn, log loss) over agent-visible features:
  action   the next move: a tool call by name, or a reply (replies are told apart
           by their opening words; a reply that describes a call for the user to
           confirm is ``say:confirm``);
  write    at a confirmation, which tool it is about to propose;
  asked    at a reply asking the user to make a call (dual control), which call;
  argument for each argument of a call, which candidate from the context
           (``arguments.py``: the user's values, observed values by path,
           composites, schema enums, lists of objects; list items can also be
           assembled field by field, and lists of scalars chosen element by
           element, with the same model);
  report   at a reply that ends in a list of values, which values to tell.
What the learner says, which tools write (the ones confirmed before they were
called) and the constants its composites multiply by are all read from the
training data (``replies.py``). Nothing here or in the modules it uses names a
domain. The fitted model is saved with the fingerprint of the trajectories it saw.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from sklearn.feature_extraction import FeatureHasher, text
from sklearn.linear_model import SGDClassifier

from evosyn.agents.learners.arguments import Arguments
from evosyn.agents.learners.candidates import (
    learned_constants,
    recurring_objects,
    recurring_values,
    scalar_pool,
)
from evosyn.agents.learners.collector import collector_paused
from evosyn.agents.learners.elements import equal_lengths
from evosyn.agents.learners.features import Candidate, Scene
from evosyn.agents.learners.fitclock import FitClock
from evosyn.agents.learners.fitrows import FitRows, Rows
from evosyn.agents.learners.profiles import candidate_profile
from evosyn.agents.learners.prompt import stated_values, system_split
from evosyn.agents.learners.replies import (
    ARGS_SLOT,
    NAME_SLOT,
    args_text,
    asked_call,
    label_of,
    labels_of,
    norm_text,
    read_conventions,
    render,
)
from evosyn.agents.learners.reported import learn_links, open_tokens
from evosyn.agents.learners.scoring import Scoring, for_prediction
from evosyn.agents.learners.state import state_tokens
from evosyn.envs.gold import confirmation_request
from evosyn.storage.atomic import atomic_path, write_json
from evosyn.storage.faults import kill_point
from evosyn.storage.records import Message, ToolCall, Trajectory

MAX_CONSTANTS = 6
MAX_VALUES = 4  # per argument: the text values the data gives it most often
MAX_OBJECTS = 16  # per object argument: the JSON objects the data gives it most often
MODELS = ("action", "write", "asked", "argument", "report")  # the fitted scikit-learn models
EPOCHS = 15  # SGD passes over the training rows (5 lost test success at 250 trajectories: README)
CHUNK = 100  # trajectories whose candidate rows are built, then hashed, at a time (``_fit``)


def fingerprint(trajectories: list[Trajectory]) -> str:
    return hashlib.sha256("\n".join(sorted(t.trajectory_id for t in trajectories)).encode()).hexdigest()[:16]


class EmbeddedLearner(Scoring, Arguments):
    name = "embedded"

    def __init__(self, seed: int = 0):
        self.seed = seed
        self.state_vec = text.HashingVectorizer(n_features=2 ** 18, alternate_sign=False, token_pattern=r"[^ ]+",
                                                lowercase=False, norm="l2")
        self.arg_vec = FeatureHasher(n_features=2 ** 18, input_type="string", alternate_sign=False)
        self.action = self.write = self.argument = self.report = None
        self.constant_action = self.constant_write = None
        self.fingerprint = "untrained"
        self.n_trajectories = 0
        self.tools: dict[str, dict[str, Any]] = {}
        self.writes: set[str] = set()  # tools the data confirmed before calling
        self.constants: list[int] = []  # multipliers the data's numeric arguments show
        self.values: dict[str, list[str]] = {}  # tool.arg -> text values the data gives it most often
        self.objects: dict[str, list[str]] = {}  # tool.arg -> JSON objects the data gives it most often
        self.texts: dict[str, str] = {}  # reply label -> its most common text
        self.slots: dict[str, str] = {}  # reply label -> the text before a list of values ("...: ")
        self.cents = False  # the data writes the numbers it tells with two decimals
        self.closing = "say:goodbye"  # the reply the data most often ends a conversation with
        # replies that ask the user to make a call themselves (dual control): label -> template and styles,
        # the model that picks the call, and each call's most common arguments
        self.requests: dict[str, tuple[str, str, str]] = {}
        self.asked = self.constant_asked = None
        self.asked_args: dict[str, dict[str, Any]] = {}
        self._pending: ToolCall | None = None
        self._stated = ""  # the values the policy of the task at hand states (``reset``)
        self.fit_cpu = FitClock()  # the last fit's CPU by phase (not saved)

    # ------------------------------------------------------------ what the data says before fitting
    def _read_conventions(self, trajectories: list[Trajectory]) -> None:
        found = read_conventions(trajectories)
        self.writes, self.texts, self.slots, self.closing = found.writes, found.texts, found.slots, found.closing
        self.requests, self.asked_args = found.requests, found.asked_args
        self.arg_requests = found.arg_requests
        self.links = learn_links(trajectories)
        self.equal = equal_lengths(trajectories)

    def _state(self, history: list[Message], scene: Scene) -> str:
        """The decision state's tokens: what ``state_tokens`` reads, and the reported problems still open."""
        state = state_tokens(history, scene, labels_of(history))
        extra = open_tokens(history, self.links) if hasattr(self, "links") else []
        return f"{state} {' '.join(extra)}" if extra else state

    def _learn_constants(self, trajectories: list[Trajectory]) -> None:
        self.constants = learned_constants(trajectories, self.writes, MAX_CONSTANTS)

    def _learn_values(self, trajectories: list[Trajectory]) -> None:
        self.values = recurring_values(trajectories, MAX_VALUES)
        self.objects = recurring_objects(trajectories, MAX_OBJECTS)

    # ------------------------------------------------------------ training
    def fit(self, trajectories: list[Trajectory], tools: list[dict[str, Any]] | None = None) -> EmbeddedLearner:
        """Behaviour cloning on verified trajectories; ``tools`` are the OpenAI tool schemas an agent sees."""
        with collector_paused():
            return self._fit(trajectories, tools)

    def _fit(self, trajectories: list[Trajectory], tools: list[dict[str, Any]] | None) -> EmbeddedLearner:
        self.tools = {t["function"]["name"]: t["function"] for t in (tools or [])}
        self.fingerprint, self.n_trajectories = fingerprint(trajectories), len(trajectories)
        stated_of, trajectories = system_split(trajectories)
        clock = self.fit_cpu = FitClock()
        with clock.phase("conventions"):
            self._read_conventions(trajectories)
            self._learn_constants(trajectories)
            self._learn_values(trajectories)
        # every decision's state and label, and the candidate rows, built CHUNK trajectories at a time: a chunk's
        # candidate rows (Python tuples, hundreds of bytes each, about 670 per trajectory) are hashed into their
        # sparse block before the next chunk is built, so the fit holds the hashed matrix (the same rows in the
        # same sequence as hashing them all at once) and one chunk's rows, never every row as Python objects
        rows = FitRows()
        for start in range(0, len(trajectories), CHUNK):
            with clock.phase("features"):
                for traj, stated in zip(trajectories[start:start + CHUNK], stated_of[start:start + CHUNK]):
                    self._decisions(traj, rows, stated)
            with clock.phase("hashing"):
                rows.flush(self._hashed)
        self.action, self.constant_action = self._classifier("action", rows.states, rows.actions)
        self.write, self.constant_write = self._classifier("write", rows.write_states, rows.writes)
        self.asked, self.constant_asked = self._classifier("asked", rows.asked_states, rows.asked_tools)
        self.argument = self._binary("argument", rows.arg_rows, rows.arg_labels)
        self.report = self._binary("report", rows.report_rows, rows.report_labels)
        self.cents = rows.styles[True] > rows.styles[False]
        return self

    def _decisions(self, traj: Trajectory, rows: FitRows, stated: str = "") -> None:
        """Every assistant decision of ``traj``: its state and label, its candidate rows (added to ``rows``);
        ``stated``: the values its system prompt states."""
        msgs = traj.messages
        for i, m in enumerate(msgs):
            if m.role != "assistant":
                continue
            history = msgs[:i]
            scene = Scene.of(history, self.writes, stated)  # one per decision: state, arguments and report share it
            label = label_of(m)
            rows.states.append(self._state(history, scene))
            rows.actions.append(label)
            if label in self.requests and (asked := asked_call(msgs, i)) is not None:
                rows.asked_states.append(rows.states[-1])
                rows.asked_tools.append(asked.name)
            if label == "say:confirm":
                nxt = next((x for x in msgs[i + 1:] if x.tool_calls), None)
                if nxt is not None:
                    rows.write_states.append(rows.states[-1])
                    rows.writes.append(nxt.tool_calls[0].name)
            if m.tool_calls:
                self._arg_samples(m.tool_calls[0], history, scene, rows.arg_feats, rows.arg_labels)
            elif label in self.slots:
                said = norm_text(m.content or "")
                for c, row in self._report_candidates(label, scene):
                    rows.report_feats.append(row)
                    plain, cents = (norm_text(render(c.value, k)) in said for k in (False, True))
                    rows.report_labels.append(int(plain or cents))
                    rows.styles[cents and not plain] += isinstance(c.value, float) and (plain or cents)

    def _sgd(self) -> SGDClassifier:
        return SGDClassifier(loss="log_loss", alpha=1e-5, max_iter=EPOCHS, tol=None, random_state=self.seed,
                             average=True)

    def _binary(self, model: str, rows: Rows, labels):
        """The binary model over the hashed candidate rows."""
        if not labels or len(set(labels)) < 2:
            return None
        X = rows.matrix()
        with self.fit_cpu.sgd(model, X, 2):
            return for_prediction(self._sgd().fit(X, labels))

    def _classifier(self, model: str, states, labels):
        if not labels:
            return None, None
        classes = len(set(labels))
        if classes == 1:
            return None, labels[0]
        with self.fit_cpu.phase("hashing"):
            X = self._states(states)
        with self.fit_cpu.sgd(model, X, classes):
            return for_prediction(self._sgd().fit(X, labels)), None

    def _report_candidates(self, label: str, scene: Scene) -> list[tuple[Candidate, tuple]]:
        """Short scalar values from observations (and composites) that a reply could tell the user."""
        out = []
        for c in scalar_pool(scene, self.constants):
            if c.source in ("obs", "composite") and isinstance(c.value, (str, int, float)) and not isinstance(
                    c.value, bool) and len(render(c.value)) <= 24:
                out.append((c, ("report", label, candidate_profile(c, set(), scene), ())))
        return out

    # ------------------------------------------------------------ acting
    def reset(self, tools: list[dict[str, Any]], policy: str) -> None:
        self.tools = {t["function"]["name"]: t["function"] for t in tools} or self.tools
        self._pending = None
        self._stated = stated_values(policy)

    def act(self, messages: list[Message]) -> Message:
        if self.action is None and self.constant_action is None:  # untrained: it can only hang up
            return Message(role="assistant", content="Goodbye.")
        scene = Scene.of(messages, self.writes, getattr(self, "_stated", ""))
        state = self._state(messages, scene)
        label = self._predict("action", self.constant_action, state) or self.closing
        last_user = next((m for m in reversed(messages) if m.role == "user"), None)
        if self._pending is not None and last_user is not None and messages and messages[-1] is last_user:
            said = (last_user.content or "").lower()
            if re.search(r"\byes\b", said) and not re.search(r"\bno\b", said):
                # the user approved exactly the action we described: carry it out
                call, self._pending = self._pending, None
                n = sum(1 for m in messages if m.tool_calls)
                return Message(role="assistant", tool_calls=[call.model_copy(update={"id": f"lc_{n}"})])
            self._pending = None
        if label == "say:confirm":
            tool = self._predict("write", self.constant_write, state)
            if tool:
                self._pending = ToolCall(id="pending", name=tool, arguments=self._choose_args(tool, messages, scene))
                return Message(role="assistant", content=confirmation_request(tool, self._pending.arguments))
            label = self.closing
        if label.startswith("tool:"):
            name = label[5:]
            if self._pending is not None and self._pending.name == name:
                args, self._pending = self._pending.arguments, None
            else:
                args = self._choose_args(name, messages, scene)
            n = sum(1 for m in messages if m.tool_calls)
            return Message(role="assistant", tool_calls=[ToolCall(id=f"lc_{n}", name=name, arguments=args)])
        if label in self.requests:
            tool = self._predict("asked", self.constant_asked, state)
            if tool:
                return Message(role="assistant", content=self._request(label, tool))
        return Message(role="assistant", content=self._say(label, scene))

    def _request(self, label: str, tool: str) -> str:
        """The reply asking the user to make ``tool``'s call, worded as the data words such requests."""
        template, name_style, args_style = self.requests[label]
        if self.asked_args.get(tool) and not args_style:  # a call with arguments: a wording that writes them
            template, name_style, args_style = getattr(self, "arg_requests", {}).get(label, self.requests[label])
        name = tool if name_style == "raw" else tool.replace("_", " ")
        text = template.replace(NAME_SLOT, name)
        return text.replace(ARGS_SLOT, args_text(self.asked_args.get(tool, {}), args_style) or "{}")

    def _say(self, label: str, scene: Scene) -> str:
        """The reply the data uses for this move; with the values to tell, when its replies carry some."""
        plain = self.texts.get(label, "Goodbye.")
        if label not in self.slots or self.report is None:
            return plain
        cands = self._report_candidates(label, scene)
        if not cands:
            return plain
        scores = self._positive("report", [row for _, row in cands])
        cents = getattr(self, "cents", False)
        values = list(dict.fromkeys(render(c.value, cents and isinstance(c.value, float))
                                    for (c, _), p in zip(cands, scores) if p > 0.5))
        return f"{self.slots[label]}{'; '.join(values)}." if values else plain

    # ------------------------------------------------------------ persistence
    def __getstate__(self) -> dict[str, Any]:
        # fit_cpu measures one process's fit; _scores and _columns are what scoring remembers (Scoring._positive)
        return {k: v for k, v in self.__dict__.items() if k not in ("fit_cpu", "_scores", "_columns")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.fit_cpu = FitClock()
        for model in MODELS:  # a model saved before its weights were laid out for scoring (for_prediction)
            if getattr(self, model, None) is not None:
                for_prediction(getattr(self, model))

    def save(self, path: Path) -> Path:
        """The model (joblib) and its JSON sidecar, each written atomically: a crash leaves the old file or none.

        Compressed (joblib's zlib, level 3): the weights are ``n_classes x 2**18`` arrays, mostly the zeros of
        features a fit never saw, three times over (scikit-learn's averaged SGD keeps its running weights), so a
        model of many next-move classes shrinks about fiftyfold (measured: docs/research)."""
        import joblib

        with atomic_path(path) as tmp:
            joblib.dump(self, tmp, compress=3)
            kill_point("train")
        write_json(path.with_suffix(".json"), {"learner": self.name, "fingerprint": self.fingerprint,
                                               "n_trajectories": self.n_trajectories, "seed": self.seed}, indent=2)
        return path

    @staticmethod
    def load(path: Path) -> EmbeddedLearner:
        import joblib

        learner = joblib.load(path)
        if not isinstance(learner, EmbeddedLearner):
            raise TypeError(f"{path} holds a {type(learner).__name__}, not an EmbeddedLearner")
        return learner

