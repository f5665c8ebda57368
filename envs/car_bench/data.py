"""CAR-bench's data, read in its own formats from a local folder.

The folder is a snapshot of the HF dataset ``johanneskirmayr/car-bench-dataset``
(or anything laid out the same way)::

    mock_data/navigation/locations.jsonl            {"id", "name", "position": {"longitude", "latitude"}}
    mock_data/navigation/pois.jsonl                 {"id", "name", "category", "position", "opening_hours",
                                                     "phone_number", "corresponding_location_id" |
                                                     "corresponding_route_ids" + "route_positions",
                                                     "charging_plugs": [{"plug_id", "power_type", "power_kw",
                                                     "availability"}] (charging stations)}
    mock_data/navigation/weather.jsonl              {"location_id", "location_name", "weather": [slots]}
    mock_data/navigation/routes_location_location.jsonl, routes_location_poi.jsonl, routes_poi_location.jsonl
                                                    {"route_id", "start_id", "destination_id", "name_via",
                                                     "distance_km", "duration_hours", "duration_minutes",
                                                     "road_types", "includes_toll", "alias", ...}
    mock_data/navigation/routes_metadata.jsonl      routes generated from a base route (see ``_derived_route``)
    mock_data/productivity_and_communication/contacts.jsonl, calendars.jsonl
    tasks/<type>_<split>.jsonl                      one task a line (``evosyn.envs.car_bench.tasks``)

A folder that holds ``navigation/`` directly (a checkout's
``docs/reference_data/mock_data``) is read as the mock data. Which folder: the
run config's ``env_data: {car_bench: FOLDER}``, else ``$EVOSYN_CARBENCH_DATA``, else the
small fixture shipped with this package (``envs/car_bench/fixture``, our own
data in the same formats). Parquet copies of the routes index and metadata
(``routes_index.parquet``, ``routes_metadata.parquet``) are read when the
jsonl files are absent.
"""
from __future__ import annotations

import json
import math
import os
from functools import cached_property
from pathlib import Path
from typing import Any

ENV_VAR = "EVOSYN_CARBENCH_DATA"
FIXTURE = Path(__file__).parent / "fixture"
ROUTE_FILES = ("routes_location_location.jsonl", "routes_location_poi.jsonl", "routes_poi_location.jsonl")


class DataMissing(RuntimeError):
    """The configured CAR-bench data folder is absent or not in CAR-bench's layout."""


def resolve_root(configured: str | os.PathLike[str] | None = None) -> Path:
    """The data folder: the config key, then the environment variable, then the fixture; ``DataMissing``,
    one line naming where the folder came from, when it is not in CAR-bench's layout."""
    raw = configured or os.environ.get(ENV_VAR) or ""
    root = Path(raw).expanduser() if raw else FIXTURE
    if not root.is_dir() or not (_mock_dir(root) / "navigation").is_dir():
        where, fix = (f"{raw!s}", "") if configured else (f"{ENV_VAR}={raw!s}", "; unset it to use the bundled fixture")
        raise DataMissing(f"{where} is not a CAR-bench data folder (expected mock_data/navigation/ "
                          f"and tasks/ under it){fix}")
    return root


def _mock_dir(root: Path) -> Path:
    return root if (root / "navigation").is_dir() else root / "mock_data"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _read_table(folder: Path, stem: str) -> list[dict[str, Any]]:
    rows = read_jsonl(folder / f"{stem}.jsonl")
    parquet = folder / f"{stem}.parquet"
    if not rows and parquet.exists():
        import pyarrow.parquet as pq

        rows = pq.read_table(parquet).to_pylist()
    return rows


class CarBenchData:
    """The mock databases of one data folder, loaded on first use and shared by every episode (read only)."""

    def __init__(self, root: Path):
        self.root = root
        self.mock = _mock_dir(root)
        self.nav = self.mock / "navigation"
        self.comm = self.mock / "productivity_and_communication"

    @cached_property
    def locations(self) -> dict[str, dict[str, Any]]:
        return {row["id"]: row for row in read_jsonl(self.nav / "locations.jsonl")}

    @cached_property
    def pois(self) -> dict[str, dict[str, Any]]:
        return {row["id"]: row for row in read_jsonl(self.nav / "pois.jsonl")}

    @cached_property
    def weather(self) -> dict[str, dict[str, Any]]:
        return {row["location_id"]: row for row in read_jsonl(self.nav / "weather.jsonl")}

    @cached_property
    def contacts(self) -> dict[str, dict[str, Any]]:
        return {row["id"]: row for row in read_jsonl(self.comm / "contacts.jsonl")}

    @cached_property
    def calendars(self) -> dict[str, dict[str, Any]]:
        return {row["id"]: row for row in read_jsonl(self.comm / "calendars.jsonl")}

    @cached_property
    def _stored_routes(self) -> dict[str, dict[str, Any]]:
        return {row["route_id"]: row for name in ROUTE_FILES for row in read_jsonl(self.nav / name)}

    @cached_property
    def _route_metadata(self) -> dict[str, dict[str, Any]]:
        return {row["route_id"]: row for row in _read_table(self.nav, "routes_metadata")}

    @cached_property
    def _pairs(self) -> dict[tuple[str, str], list[str]]:
        """(start id, destination id) -> route ids, from the index when there is one, else from the routes."""
        pairs: dict[tuple[str, str], list[str]] = {}
        index = _read_table(self.nav, "routes_index")
        rows = index or [*self._stored_routes.values(), *self._route_metadata.values()]
        for row in rows:
            pairs.setdefault((row["start_id"], row["destination_id"]), []).append(row["route_id"])
        return pairs

    # ------------------------------------------------------------ lookups
    def route(self, route_id: str) -> dict[str, Any] | None:
        found = self._stored_routes.get(route_id)
        if found is None and route_id in self._route_metadata:
            found = self._derived_route(self._route_metadata[route_id])
        return found

    def routes_between(self, start_id: str, destination_id: str) -> list[dict[str, Any]]:
        return [r for rid in self._pairs.get((start_id, destination_id), []) if (r := self.route(rid)) is not None]

    def pois_at(self, location_id: str) -> list[dict[str, Any]]:
        return [p for p in self.pois.values() if p.get("corresponding_location_id") == location_id]

    def place(self, place_id: str) -> dict[str, Any] | None:
        return self.locations.get(place_id) or self.pois.get(place_id)

    def weather_at(self, place_id: str) -> dict[str, Any] | None:
        """A location's weather, or the weather of the location a POI belongs to."""
        if place_id.startswith("poi_"):
            poi = self.pois.get(place_id)
            place_id = poi.get("corresponding_location_id", "") if poi else ""
        return self.weather.get(place_id) if place_id in self.locations else None

    @cached_property
    def contact_emails(self) -> set[str]:
        return {c["email"] for c in self.contacts.values() if c.get("email")}

    def _derived_route(self, meta: dict[str, Any]) -> dict[str, Any] | None:
        """A route stored as metadata: its base route cut at ``fraction`` (a POI along it) plus a detour,
        driven at 50 km/h, which is how CAR-bench defines these routes."""
        base = self.route(meta.get("base_route_id") or "")
        if base is None:
            return None
        fraction = meta.get("fraction")
        detour = float(meta.get("detour_distance_km", 0))
        base_minutes = base.get("duration_hours", 0) * 60 + base.get("duration_minutes", 0)
        share = 1.0 if fraction is None else float(fraction)
        minutes = base_minutes * share + detour / 50.0 * 60
        alias = base.get("alias") or {0: ["fastest", "first"], 1: ["second"], 2: ["third"]}.get(
            meta.get("route_alternative", 0), [])
        return {"route_id": meta["route_id"], "start_id": meta.get("start_id"),
                "destination_id": meta.get("destination_id"), "name_via": base.get("name_via", ""),
                "distance_km": round(base.get("distance_km", 0) * share + detour, 2),
                "duration_hours": int(minutes // 60), "duration_minutes": math.ceil(minutes % 60),
                "road_types": base.get("road_types", ["country road"]),
                "includes_toll": base.get("includes_toll", False), "alias": alias,
                "base_route_id": meta["base_route_id"]}
