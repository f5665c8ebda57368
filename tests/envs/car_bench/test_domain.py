import json
import shutil

import pytest

from evosyn.envs.car_bench.data import ENV_VAR, FIXTURE, DataMissing, resolve_root
from evosyn.envs.car_bench.domain import CarBenchDomain
from evosyn.envs.car_bench.tasks import CarBenchTask
from evosyn.envs.car_bench.tools import CONFIRMATION_TOOLS, TOOLS


def test_the_57_tools_with_kinds_and_schemas(car):
    specs = car.tools("assistant")
    assert len(specs) == len(TOOLS) == 57 and car.tools("user") == []
    kinds = {s.name: s.kind for s in specs}
    assert sum(k == "write" for k in kinds.values()) == 17 + 7 + 2  # vehicle setters, route edits, email and call
    assert kinds["get_weather"] == "read" and kinds["think"] == "generic" and kinds["set_fan_speed"] == "write"
    assert CONFIRMATION_TOOLS == {"send_email", "open_close_trunk_door", "set_head_lights_high_beams"}
    assert car.tool("send_email").description.startswith("REQUIRES_CONFIRMATION")
    for spec in specs:
        assert spec.parameters["type"] == "object" and spec.openai_schema()["function"]["name"] == spec.name


def test_arguments_are_checked_against_the_schema(car):
    assert car.validate_arguments("set_fan_speed", {"level": 3}) is None
    assert "schema" in car.validate_arguments("set_fan_speed", {"level": 9})
    assert "schema" in car.validate_arguments("set_fan_speed", {"level": 3, "zone": "x"})
    assert "schema" in car.validate_arguments("open_close_window", {"window": "ROOF", "percentage": 10})
    assert "no assistant tool" in car.validate_arguments("fly", {})


def test_splits_and_tasks_parse_from_the_jsonl_rows(car):
    splits = car.splits()
    assert {"base_train", "base_test", "hallucination_train", "hallucination_test", "disambiguation_train",
            "disambiguation_test"} <= set(splits)
    assert splits["train"] + splits["test"] == len(car.tasks()) == 17
    task = car.official_task("base_f2")
    assert task.id == "base_f2" and task.family == "base" and task.actions[2].dependent_on_action_index == 1
    with pytest.raises(KeyError, match="known: base_train"):
        car.tasks("dev")


def test_a_task_row_round_trips_in_the_dataset_format(car):
    line = (FIXTURE / "tasks" / "hallucination_test.jsonl").read_text().splitlines()[0]
    row = json.loads(line)
    assert isinstance(row["context_init_config"], str) and isinstance(row["actions"], str)
    task = CarBenchTask.model_validate(row)
    assert task.removed_part and task.is_hallucination
    assert task.to_row() == row
    assert car.task_from_json(task.to_json()) == task
    with pytest.raises(ValueError, match="not a CAR-bench task"):
        car.task_from_json({"id": "x", "user_scenario": {}})


def test_the_data_folder_comes_from_the_config_then_the_variable(tmp_path, monkeypatch):
    copy = tmp_path / "snapshot"
    shutil.copytree(FIXTURE, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (copy / "tasks" / "base_test.jsonl").unlink()
    monkeypatch.setenv(ENV_VAR, str(copy))
    assert resolve_root() == copy
    assert "base_test" not in CarBenchDomain().splits()
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "missing"))
    with pytest.raises(DataMissing) as err:
        CarBenchDomain()
    assert ENV_VAR in str(err.value) and "\n" not in str(err.value)
    assert resolve_root(copy) == copy  # the run config's key wins over the variable
    monkeypatch.delenv(ENV_VAR)
    assert resolve_root() == FIXTURE


def test_episodes_start_from_the_tasks_context(car):
    task = car.official_task("base_f5")
    episode = car.episode(task)
    assert episode.state.window_driver_position == 60 and episode.fixed.current_location.id == "loc_mun_9995"
    fresh = car.episode(task)
    fresh.step("open_close_window", {"window": "ALL", "percentage": 0})
    assert fresh.state_digest() != episode.state_digest() == car.episode(task).state_digest()
    assert car.episode({"fan_speed": 4}).state.fan_speed == 4 and car.episode().state.fan_speed == 0
    assert '"name":"Munich"' in car.task_policy(task) and "2025" in car.task_policy(task)


def test_a_hallucination_task_hides_what_it_removed(car):
    tools = {s.name: s for s in car.tools_for(car.official_task("hallucination_f0"))}
    assert "set_seat_heating" not in tools and len(tools) == 56
    param = {s.name: s for s in car.tools_for(car.official_task("hallucination_f1"))}["set_fan_speed"]
    assert "level" not in param.parameters["properties"] and "level" not in param.parameters["required"]
    assert "level" in car.tool("set_fan_speed").parameters["properties"]  # the shared spec is untouched


def test_summary_counts_the_mock_data(car):
    summary = car.summary()
    assert summary.entity_counts == {"locations": 5, "pois": 7, "contacts": 6, "calendars": 3}
    assert len(summary.tools) == 57


def test_the_routes_index_and_metadata_read_from_parquet_as_the_hub_stores_them(tmp_path, car):
    import pyarrow.json as paj
    import pyarrow.parquet as pq

    copy = tmp_path / "hub"
    shutil.copytree(FIXTURE, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    nav = copy / "mock_data" / "navigation"
    for stem in ("routes_index", "routes_metadata"):
        pq.write_table(paj.read_json(nav / f"{stem}.jsonl"), nav / f"{stem}.parquet")
        (nav / f"{stem}.jsonl").unlink()
    hub = CarBenchDomain(copy)
    derived = hub.data.route("rlp_mun_res_3002")  # a route stored as metadata: a share of its base plus a detour
    assert derived == car.data.route("rlp_mun_res_3002") and derived["distance_km"] == 151.6
    assert [r["route_id"] for r in hub.data.routes_between("loc_mun_9995", "loc_stu_1003")] == [
        "rll_mun_stu_2003", "rll_mun_stu_2004", "rll_mun_stu_2005"]


def test_context_keys_carbench_ignores_are_ignored(car):
    config = {"current_location": {"id": "loc_ulm_1004", "name": "Ulm", "iso2": "DE",
                                   "position": {"longitude": 9.99, "latitude": 48.4}},
              "fan_speed": 2, "fuel_type": "gasoline"}
    episode = car.episode(config)
    assert episode.fixed.current_location.id == "loc_ulm_1004" and episode.state.fan_speed == 2
