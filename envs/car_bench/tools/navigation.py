"""Navigation tools: 6 that look up places, POIs and routes, 7 that set or edit the active route.

The navigation state is a list of waypoints (start, stops, destination) and
one route per leg. The editing tools need an active navigation (AUT-POL:017)
and never delete the last leg (AUT-POL:019); both are recorded as policy
violations as well as refused, like CAR-bench does.
"""
from __future__ import annotations

from datetime import time
from itertools import pairwise
from typing import Any

from rapidfuzz.distance import Levenshtein

from evosyn.envs.car_bench.state import POI_CATEGORIES
from evosyn.envs.car_bench.tools.base import (
    CarTool,
    ToolContext,
    ToolFailure,
    boolean,
    enum,
    id_ok,
    params,
    string,
)

FILTERS_AT = ("any::currently_open", "charging_stations::has_available_plug", "charging_stations::has_dc_plug")
FILTERS_ALONG = ("any::currently_open", "any::sort_by_distance", "charging_stations::has_available_plug",
                 "charging_stations::has_dc_plug")
AROUND_KM = 25  # a POI "at kilometer k" of a route lies within this many km of k
MAX_ALONG = 3  # POIs returned along a route


# ------------------------------------------------------------ helpers
def _route(ctx: ToolContext, route_id: str, code: str) -> dict[str, Any]:
    found = ctx.data.route(route_id)
    if found is None:
        raise ToolFailure(code, f"route {route_id} not found")
    return found


def _need_active(ctx: ToolContext, code: str) -> None:
    if not ctx.state.navigation_active:
        ctx.policy_errors.append("AUT-POL:017: navigation edits need an active navigation")
        raise ToolFailure(code, "the navigation is not active")


def _ids(ctx: ToolContext, checks: dict[str, tuple[Any, str]]) -> None:
    for code, (value, kind) in checks.items():
        if not id_ok(value, kind):
            raise ToolFailure(code, f"malformed id {value!r}")


def _minutes(route: dict[str, Any]) -> int:
    return int(route.get("duration_hours", 0)) * 60 + int(route.get("duration_minutes", 0))


def is_open(hours: str, now: time) -> bool:
    """Opening hours like ``08:00h - 20:00h`` (overnight spans allowed); unparseable hours count as closed."""
    try:
        start, end = (part.strip().replace("h", "") for part in hours.split(" - "))
        (h1, m1), (h2, m2) = (map(int, start.split(":")), map(int, end.split(":")))
    except ValueError:
        return False
    if (h1, m1) == (0, 0) and (h2, m2) == (24, 0):
        return True
    opens, closes = time(h1, m1), time(23, 59) if (h2, m2) == (24, 0) else time(h2, m2)
    return opens <= now <= closes if opens < closes else (now >= opens or now <= closes)


def _filtered(ctx: ToolContext, pois: list[dict[str, Any]], filters: list[str] | None,
              allowed: tuple[str, ...], code: str) -> list[dict[str, Any]]:
    bad = [f for f in filters or [] if f not in allowed]
    if bad:
        raise ToolFailure(code, f"unknown filters {bad}; known: {list(allowed)}")
    clock = ctx.fixed.current_datetime
    now = time(clock.hour, clock.minute)
    out = []
    for poi in pois:
        plugs = poi.get("charging_plugs", [])
        keep = all((f != "any::currently_open" or is_open(poi.get("opening_hours", ""), now))
                   and (f != "charging_stations::has_available_plug"
                        or any(p.get("availability") == "available" for p in plugs))
                   and (f != "charging_stations::has_dc_plug" or any(p.get("power_type") == "DC" for p in plugs))
                   for f in filters or [])
        if keep:
            out.append(poi)
    return out


# ------------------------------------------------------------ readers
def location_id(ctx: ToolContext, location: str) -> dict[str, Any]:
    if not isinstance(location, str) or not location:
        raise ToolFailure("GET_LOCATION_ID_BY_LOCATION_NAME_002", "location must be a non-empty string")
    wanted = location.lower()
    best, best_distance = None, 3  # names within edit distance 2 match; an exact match wins at once
    for loc in ctx.data.locations.values():
        distance = Levenshtein.distance(wanted, str(loc.get("name", "")).lower())
        if distance < best_distance or distance == 0:
            best, best_distance = loc, distance
            if distance == 0:
                break
    if best is None:
        raise ToolFailure("GET_LOCATION_ID_BY_LOCATION_NAME_004", f"no location close to {location!r}")
    return {"id": best["id"]}


def routes(ctx: ToolContext, start_id: str, destination_id: str) -> dict[str, Any]:
    _ids(ctx, {"GET_ROUTES_001": (start_id, "place"), "GET_ROUTES_002": (destination_id, "place")})
    if start_id.startswith("poi_") and destination_id.startswith("poi_"):
        raise ToolFailure("GET_ROUTES_003", "there are no routes between two POIs")
    found = ctx.data.routes_between(start_id, destination_id)
    if not found:
        raise ToolFailure("GET_ROUTES_004", f"no route from {start_id} to {destination_id}")
    return {"routes": found}


def pois_at(ctx: ToolContext, location_id: str, category_poi: str, filters: list[str] | None = None) -> dict[str, Any]:
    _ids(ctx, {"SEARCH_POI_AT_LOC_001": (location_id, "place")})
    found = [p for p in ctx.data.pois_at(location_id) if p.get("category") == category_poi]
    found = _filtered(ctx, found, filters, FILTERS_AT, "SEARCH_POI_AT_LOC_003")
    if not found and location_id not in ctx.data.locations:
        raise ToolFailure("SEARCH_POI_AT_LOC_004", f"location {location_id} not found")
    return {"pois_found": found}


def pois_along(ctx: ToolContext, route_id: str, category_poi: str, at_kilometer: int | None = None,
               filters: list[str] | None = None) -> dict[str, Any]:
    _ids(ctx, {"SEARCH_POI_ATR_002": (route_id, "route")})
    if category_poi == "charging_stations" and at_kilometer is None:
        raise ToolFailure("SEARCH_POI_ATR_007", "at_kilometer is required to search charging stations")
    main = _route(ctx, route_id, "SEARCH_POI_ATR_004")
    start, end = main["start_id"], main["destination_id"]
    if not (start.startswith("loc_") and end.startswith("loc_")):
        raise ToolFailure("SEARCH_POI_ATR_006", "POIs can only be searched along routes between two locations")
    found = []
    for poi in ctx.data.pois.values():
        if poi.get("category") != category_poi or route_id not in poi.get("corresponding_route_ids", []):
            continue
        position = poi.get("route_positions", {}).get(route_id[:11], {})  # keyed by the route's direction
        if at_kilometer is not None and "at_route_kilometer" in position \
                and abs(position["at_route_kilometer"] - at_kilometer) > AROUND_KM:
            continue
        to_poi = next((r for r in ctx.data.routes_between(start, poi["id"]) if r.get("base_route_id") == route_id), None)
        from_poi = next((r for r in ctx.data.routes_between(poi["id"], end) if r.get("base_route_id") == route_id), None)
        if to_poi is None or from_poi is None:
            continue
        detour_km = max(0.0, float(to_poi["distance_km"]) + float(from_poi["distance_km"]) - float(main["distance_km"]))
        detour_min = max(0, _minutes(to_poi) + _minutes(from_poi) - _minutes(main))
        found.append({**poi, "detour_from_route_km": {"detour": round(detour_km, 1), "unit": "km"},
                      "detour_from_route_time": {"hour": detour_min // 60, "minutes": detour_min % 60}})
    found = _filtered(ctx, found, filters, FILTERS_ALONG, "SEARCH_POI_ATR_006")
    if "any::sort_by_distance" in (filters or []):
        found.sort(key=lambda p: p["detour_from_route_km"]["detour"])
    else:
        found.sort(key=lambda p: p["detour_from_route_time"]["hour"] * 60 + p["detour_from_route_time"]["minutes"])
    return {"pois_found_along_route": found[:MAX_ALONG]}


def navigation_state(ctx: ToolContext, detailed_information: bool = False) -> dict[str, Any]:
    s = ctx.state
    basic = {"navigation_active": s.navigation_active, "waypoints_id": list(s.waypoints_id),
             "routes_to_final_destination_id": list(s.routes_to_final_destination_id)}
    if not detailed_information:
        return basic
    waypoints = [ctx.data.place(w) or {"id": w, "error": "Not found"} for w in s.waypoints_id]
    legs = [ctx.data.route(r) or {"id": r, "error": "Not found"} for r in s.routes_to_final_destination_id]
    return {**basic, "details": {"waypoints": waypoints, "routes": legs}}


def convert(ctx: ToolContext, route_id: str, time_minutes: float | None = None,
            distance_km: float | None = None) -> dict[str, Any]:
    _ids(ctx, {"CONVERT_RTDT_001": (route_id, "route")})
    if (time_minutes is None) == (distance_km is None):
        raise ToolFailure("CONVERT_RTDT_002", "give exactly one of time_minutes and distance_km")
    leg = _route(ctx, route_id, "CONVERT_RTDT_004")
    total_min, total_km = float(_minutes(leg)), float(leg.get("distance_km", 0))
    if total_min <= 0 or total_km <= 0:
        raise ToolFailure("CONVERT_RTDT_011", f"route {route_id} has no length")
    if time_minutes is not None:
        if time_minutes > total_min:
            raise ToolFailure("CONVERT_RTDT_005", f"the route takes only {total_min:.1f} min")
        return {"distance_km": round(time_minutes / total_min * total_km, 1)}
    if distance_km > total_km:
        raise ToolFailure("CONVERT_RTDT_006", f"the route is only {total_km:.1f} km long")
    return {"time_minutes": round(distance_km / total_km * total_min, 1)}


# ------------------------------------------------------------ writers
def set_navigation(ctx: ToolContext, route_ids: list[str]) -> dict[str, Any]:
    if ctx.state.navigation_active:
        ctx.policy_errors.append("AUT-POL:018: a new navigation was set while one is active")
        raise ToolFailure("SET_NAVIGATION_001", "a navigation is active: edit it or delete it first")
    if not route_ids:
        raise ToolFailure("SET_NAVIGATION_002", "route_ids is empty")
    for rid in route_ids:
        _ids(ctx, {"SET_NAVIGATION_002": (rid, "route")})
    if ctx.data.route(route_ids[0]) is None:
        # CAR-bench's tool fails on an unknown first route before it can refuse it: an Error answer, which its
        # reward does not count as a tool execution error (the later routes are refused as unknown)
        raise LookupError(f"route {route_ids[0]} not found")
    legs = [_route(ctx, rid, "SET_NAVIGATION_004") for rid in route_ids]
    for i, (a, b) in enumerate(pairwise(legs)):
        if a["destination_id"] != b["start_id"]:
            raise ToolFailure("SET_NAVIGATION_005", f"route {i} does not end where route {i + 1} starts")
    waypoints = [legs[0]["start_id"], *(leg["destination_id"] for leg in legs)]
    ctx.set(navigation_active=True, waypoints_id=waypoints, routes_to_final_destination_id=list(route_ids))
    return {"navigation_set": True, "start_id": waypoints[0], "waypoints": waypoints, "destination_id": waypoints[-1]}


def add_waypoint(ctx: ToolContext, waypoint_id_to_add: str, waypoint_id_before_new_waypoint: str,
                 route_id_leading_to_new_waypoint: str, waypoint_id_after_new_waypoint: str | None = None,
                 route_id_leading_away_from_new_waypoint: str | None = None) -> dict[str, Any]:
    new, before, after = waypoint_id_to_add, waypoint_id_before_new_waypoint, waypoint_id_after_new_waypoint
    to_id, away_id = route_id_leading_to_new_waypoint, route_id_leading_away_from_new_waypoint
    checks = {"NAV_ADD_WP_001": (new, "place"), "NAV_ADD_WP_002": (before, "place"), "NAV_ADD_WP_004": (to_id, "route")}
    if after is not None:
        checks["NAV_ADD_WP_003"] = (after, "place")
    if away_id is not None:
        checks["NAV_ADD_WP_005"] = (away_id, "route")
    _ids(ctx, checks)
    _need_active(ctx, "NAV_ADD_WP_006")
    points, legs = list(ctx.state.waypoints_id), list(ctx.state.routes_to_final_destination_id)
    if before not in points:
        raise ToolFailure("NAV_ADD_WP_007", f"{before} is not on the current route")
    i = points.index(before)
    inserted = bool(after and away_id)
    if not inserted and i != len(points) - 1:
        raise ToolFailure("NAV_ADD_WP_008", "a stop before the destination needs the waypoint and route after it")
    if after and (i + 1 >= len(points) or points[i + 1] != after):
        raise ToolFailure("NAV_ADD_WP_009", f"{after} does not follow {before} on the current route")
    to_leg = _route(ctx, to_id, "NAV_ADD_WP_009")
    away_leg = _route(ctx, away_id, "NAV_ADD_WP_010") if away_id else None
    if to_leg.get("start_id") != before or to_leg.get("destination_id") != new:
        raise ToolFailure("NAV_ADD_WP_011", f"route {to_id} does not lead from {before} to {new}")
    if away_leg is not None and (away_leg.get("start_id") != new or away_leg.get("destination_id") != after):
        raise ToolFailure("NAV_ADD_WP_013", f"route {away_id} does not lead from {new} to {after}")
    if inserted:
        points, legs = points[:i + 1] + [new] + points[i + 1:], legs[:i] + [to_id, away_id] + legs[i + 1:]
    else:
        points, legs = points[:i + 1] + [new], legs[:i] + [to_id]
    ctx.set(waypoints_id=points, routes_to_final_destination_id=legs)
    return {"waypoint_added": True, "new_waypoints_id": points, "new_routes_id": legs}


def delete_destination(ctx: ToolContext, destination_id_to_delete: str) -> dict[str, Any]:
    _ids(ctx, {"NAVIGATION_DELETE_DESTINATION_001": (destination_id_to_delete, "place")})
    _need_active(ctx, "NAVIGATION_DELETE_DESTINATION_002")
    points = ctx.state.waypoints_id
    if len(points) < 3:
        ctx.policy_errors.append("AUT-POL:019: deleting the only destination would delete the whole route")
        raise ToolFailure("NAVIGATION_DELETE_DESTINATION_003", "there is no stop to become the destination")
    if points[-1] != destination_id_to_delete:
        raise ToolFailure("NAVIGATION_DELETE_DESTINATION_004", "that is not the current destination")
    ctx.set(waypoints_id=points[:-1], routes_to_final_destination_id=ctx.state.routes_to_final_destination_id[:-1])
    return {"destination_deleted": True, "new_waypoints": ctx.state.waypoints_id,
            "new_routes": ctx.state.routes_to_final_destination_id}


def delete_waypoint(ctx: ToolContext, waypoint_id_to_delete: str, route_id_without_waypoint: str) -> dict[str, Any]:
    gone, bridge = waypoint_id_to_delete, route_id_without_waypoint
    _ids(ctx, {"NAVIGATION_DELETE_WAYPOINT_001": (gone, "place"), "NAVIGATION_DELETE_WAYPOINT_002": (bridge, "route")})
    _need_active(ctx, "NAVIGATION_DELETE_WAYPOINT_003")
    leg = _route(ctx, bridge, "NAVIGATION_DELETE_WAYPOINT_004")
    points, legs = list(ctx.state.waypoints_id), list(ctx.state.routes_to_final_destination_id)
    if gone not in points:
        raise ToolFailure("NAVIGATION_DELETE_WAYPOINT_005", f"{gone} is not on the current route")
    i = points.index(gone)
    if i in (0, len(points) - 1):
        raise ToolFailure("NAVIGATION_DELETE_WAYPOINT_008", "the start or the destination cannot be deleted here")
    if leg["start_id"] != points[i - 1] or leg["destination_id"] != points[i + 1]:
        raise ToolFailure("NAVIGATION_DELETE_WAYPOINT_006", f"route {bridge} does not bridge the deleted stop")
    ctx.set(waypoints_id=points[:i] + points[i + 1:], routes_to_final_destination_id=legs[:i - 1] + [bridge] + legs[i + 1:])
    return {"waypoint_deleted": True, "new_waypoints": ctx.state.waypoints_id,
            "new_routes": ctx.state.routes_to_final_destination_id}


def replace_destination(ctx: ToolContext, new_destination_id: str,
                        route_id_leading_to_new_destination: str) -> dict[str, Any]:
    new, to_id = new_destination_id, route_id_leading_to_new_destination
    _ids(ctx, {"NAVIGATION_REPLACE_ONE_WAYPOINT_001": (new, "place"),
               "NAVIGATION_REPLACE_ONE_WAYPOINT_002": (to_id, "route")})
    _need_active(ctx, "NAVIGATION_REPLACE_ONE_WAYPOINT_003")
    leg = _route(ctx, to_id, "NAVIGATION_REPLACE_ONE_WAYPOINT_005")
    points = ctx.state.waypoints_id
    if leg["destination_id"] != new or points[0] == new or leg["start_id"] != points[-2]:
        raise ToolFailure("NAVIGATION_REPLACE_ONE_WAYPOINT_006", f"route {to_id} does not lead from the last stop to {new}")
    ctx.set(waypoints_id=points[:-1] + [new],
            routes_to_final_destination_id=ctx.state.routes_to_final_destination_id[:-1] + [to_id])
    return {"destination_replaced": True, "new_waypoints": ctx.state.waypoints_id,
            "new_routes": ctx.state.routes_to_final_destination_id}


def replace_waypoint(ctx: ToolContext, waypoint_id_to_replace: str, new_waypoint_id: str,
                     route_id_leading_to_new_waypoint: str, route_id_leading_away_from_new_waypoint: str) -> dict[str, Any]:
    old, new = waypoint_id_to_replace, new_waypoint_id
    to_id, away_id = route_id_leading_to_new_waypoint, route_id_leading_away_from_new_waypoint
    _ids(ctx, {"NAVIGATION_REPLACE_ONE_WAYPOINT_001": (old, "place"), "NAVIGATION_REPLACE_ONE_WAYPOINT_002": (new, "place"),
               "NAVIGATION_REPLACE_ONE_WAYPOINT_003": (to_id, "route"),
               "NAVIGATION_REPLACE_ONE_WAYPOINT_004": (away_id, "route")})
    _need_active(ctx, "NAVIGATION_REPLACE_ONE_WAYPOINT_005")
    to_leg = _route(ctx, to_id, "NAVIGATION_REPLACE_ONE_WAYPOINT_006")
    away_leg = _route(ctx, away_id, "NAVIGATION_REPLACE_ONE_WAYPOINT_007")
    points, legs = list(ctx.state.waypoints_id), list(ctx.state.routes_to_final_destination_id)
    if to_leg["destination_id"] != new or away_leg["start_id"] != new:
        raise ToolFailure("NAVIGATION_REPLACE_ONE_WAYPOINT_008", f"the routes do not pass through {new}")
    if new in (points[0], points[-1]):
        raise ToolFailure("NAVIGATION_REPLACE_ONE_WAYPOINT_010", "the start or the destination cannot be replaced here")
    if old not in points:
        raise ToolFailure("NAVIGATION_REPLACE_ONE_WAYPOINT_011", f"{old} is not on the current route")
    i = points.index(old)
    if i in (0, len(points) - 1) or to_leg["start_id"] != points[i - 1] or away_leg["destination_id"] != points[i + 1]:
        raise ToolFailure("NAVIGATION_REPLACE_ONE_WAYPOINT_012", "the routes do not connect to the stops around it")
    ctx.set(waypoints_id=points[:i] + [new] + points[i + 1:],
            routes_to_final_destination_id=legs[:i - 1] + [to_id, away_id] + legs[i + 1:])
    return {"waypoint_replaced": True, "new_waypoints": ctx.state.waypoints_id,
            "new_routes": ctx.state.routes_to_final_destination_id}


def delete_navigation(ctx: ToolContext) -> dict[str, Any]:
    ctx.set(navigation_active=False, waypoints_id=[], routes_to_final_destination_id=[])
    return {"navigation_active": False, "new_waypoints": [], "new_routes": []}


_ID = string("An id (loc_..., poi_...).")
_ROUTE = string("A route id (rll_..., rlp_..., rpl_...).")
_N = "Navigation: "
_CATEGORY = enum("POI category.", POI_CATEGORIES)


def _filters(values: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "array", "description": "Filters the results must pass.", "items": {"type": "string", "enum": list(values)}}


TOOLS = [
    CarTool("get_location_id_by_location_name", "read", "navigation", _N + "the id of a city by its name.",
            params({"location": string("The city's main name, e.g. Berlin.")}, ("location",)), location_id),
    CarTool("get_routes_from_start_to_destination", "read", "navigation",
            _N + "the route alternatives between two places (not between two POIs).",
            params({"start_id": _ID, "destination_id": _ID}, ("start_id", "destination_id")), routes),
    CarTool("search_poi_at_location", "read", "navigation", _N + "POIs of a category at a location.",
            params({"location_id": _ID, "category_poi": _CATEGORY, "filters": _filters(FILTERS_AT)},
                   ("location_id", "category_poi")), pois_at),
    CarTool("search_poi_along_the_route", "read", "navigation",
            _N + "POIs of a category along a route between two locations, with their detour.",
            params({"route_id": _ROUTE, "category_poi": _CATEGORY,
                    "at_kilometer": {"type": "integer", "description": "Around which kilometer of the route "
                                     "(required for charging stations)."},
                    "filters": _filters(FILTERS_ALONG)}, ("route_id", "category_poi")), pois_along),
    CarTool("get_current_navigation_state", "read", "navigation", _N + "whether a route is active, its stops and legs.",
            params({"detailed_information": {**boolean("Also return each stop's and leg's details."), "default": False}}),
            navigation_state),
    CarTool("convert_route_distance_and_time", "read", "navigation",
            _N + "how far the car gets on a route in a time, or how long a distance on it takes.",
            params({"route_id": _ROUTE, "time_minutes": {"type": "integer", "description": "Minutes driven."},
                    "distance_km": {"type": "integer", "description": "Kilometers driven."}}, ("route_id",)), convert),
    CarTool("set_new_navigation", "write", "navigation", _N + "start a navigation along consecutive routes.",
            params({"route_ids": {"type": "array", "items": {"type": "string"},
                                  "description": "One route per leg, in driving order."}}, ("route_ids",)),
            set_navigation),
    CarTool("navigation_add_one_waypoint", "write", "navigation", _N + "add a stop to the active route.",
            params({"waypoint_id_to_add": _ID, "waypoint_id_before_new_waypoint": _ID,
                    "waypoint_id_after_new_waypoint": {**_ID, "default": None},
                    "route_id_leading_to_new_waypoint": _ROUTE,
                    "route_id_leading_away_from_new_waypoint": {**_ROUTE, "default": None}},
                   ("waypoint_id_to_add", "waypoint_id_before_new_waypoint", "route_id_leading_to_new_waypoint")),
            add_waypoint),
    CarTool("navigation_delete_destination", "write", "navigation",
            _N + "drop the destination; the last stop becomes the destination.",
            params({"destination_id_to_delete": _ID}, ("destination_id_to_delete",)), delete_destination),
    CarTool("navigation_delete_waypoint", "write", "navigation", _N + "drop an intermediate stop.",
            params({"waypoint_id_to_delete": _ID, "route_id_without_waypoint": _ROUTE},
                   ("waypoint_id_to_delete", "route_id_without_waypoint")), delete_waypoint),
    CarTool("navigation_replace_final_destination", "write", "navigation", _N + "change the destination.",
            params({"new_destination_id": _ID, "route_id_leading_to_new_destination": _ROUTE},
                   ("new_destination_id", "route_id_leading_to_new_destination")), replace_destination),
    CarTool("navigation_replace_one_waypoint", "write", "navigation", _N + "swap an intermediate stop for another.",
            params({"waypoint_id_to_replace": _ID, "new_waypoint_id": _ID, "route_id_leading_to_new_waypoint": _ROUTE,
                    "route_id_leading_away_from_new_waypoint": _ROUTE},
                   ("waypoint_id_to_replace", "new_waypoint_id", "route_id_leading_to_new_waypoint",
                    "route_id_leading_away_from_new_waypoint")), replace_waypoint),
    CarTool("delete_current_navigation", "write", "navigation", _N + "stop and clear the active navigation.",
            params(), delete_navigation),
]
