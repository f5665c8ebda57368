"""Vehicle tools: 17 that set the car's state and 12 that read it."""
from __future__ import annotations

from typing import Any

from evosyn.envs.car_bench.state import AIRFLOW, CIRCULATION
from evosyn.envs.car_bench.tools.base import (
    CarTool,
    ToolContext,
    ToolFailure,
    boolean,
    enum,
    integer,
    params,
    percent_ok,
)

WINDOWS = ("ALL", "DRIVER", "PASSENGER", "DRIVER_REAR", "PASSENGER_REAR", "RIGHT_REAR", "LEFT_REAR")
# which state field each seat position names (RIGHT_REAR is the driver's rear side, LEFT_REAR the passenger's)
_SEAT_FIELD = {"DRIVER": "driver", "PASSENGER": "passenger", "DRIVER_REAR": "driver_rear",
               "RIGHT_REAR": "driver_rear", "PASSENGER_REAR": "passenger_rear", "LEFT_REAR": "passenger_rear"}
ZONES = ("ALL_ZONES", "DRIVER", "PASSENGER")
COLORS = ("RED", "GREEN", "BLUE", "YELLOW", "WHITE", "PINK", "ORANGE", "PURPLE", "CYAN", "NONE")


def _seat_fields(position: str, template: str) -> list[str]:
    seats = ("driver", "passenger", "driver_rear", "passenger_rear") if position == "ALL" else (_SEAT_FIELD[position],)
    return [template.format(seat) for seat in seats]


def _zone_fields(zone: str, template: str) -> list[str]:
    seats = ("driver", "passenger") if zone == "ALL_ZONES" else (zone.lower(),)
    return [template.format(seat) for seat in seats]


def _percentage(code: str, value: Any) -> None:
    if not percent_ok(value):
        raise ToolFailure(code, "percentage must lie between 0 and 100")


# ------------------------------------------------------------ setters
def sunroof(ctx: ToolContext, percentage: int) -> dict[str, Any]:
    _percentage("OPEN_CLOSE_SUNROOF_001", percentage)
    ctx.set(sunroof_position=percentage)
    return {"percentage": percentage}


def sunshade(ctx: ToolContext, percentage: int) -> dict[str, Any]:
    _percentage("OPEN_CLOSE_SUNSHADE_001", percentage)
    ctx.set(sunshade_position=percentage)
    return {"percentage": percentage}


def trunk(ctx: ToolContext, action: str) -> dict[str, Any]:
    if action not in ("OPEN", "CLOSE"):
        raise ToolFailure("OPEN_CLOSE_TRUNK_DOOR_001", "action must be OPEN or CLOSE")
    ctx.set(trunk_door_position=action)
    return {"action": action}


def window(ctx: ToolContext, window: Any, percentage: int) -> dict[str, Any]:
    _percentage("OPEN_CLOSE_WINDOW_001", percentage)
    if isinstance(window, list):
        raise ToolFailure("OPEN_CLOSE_WINDOW_002", "one window (or ALL) per call; use parallel calls for several")
    if window not in WINDOWS:
        raise ToolFailure("OPEN_CLOSE_WINDOW_003", f"unknown window; one of {', '.join(WINDOWS)}")
    ctx.set(**{f: percentage for f in _seat_fields(window, "window_{}_position")})
    return {"window": window, "percentage": percentage}


def air_circulation(ctx: ToolContext, mode: str) -> dict[str, Any]:
    if mode not in CIRCULATION:
        raise ToolFailure("SET_AIR_CIRCULATION_001", f"unknown mode; one of {', '.join(CIRCULATION)}")
    ctx.set(air_circulation=mode)
    return {"mode": mode}


def air_conditioning(ctx: ToolContext, on: bool) -> dict[str, Any]:
    ctx.set(air_conditioning=on)
    return {"on": on}


def ambient_lights(ctx: ToolContext, on: bool, lightcolor: str) -> dict[str, Any]:
    if lightcolor not in COLORS:
        raise ToolFailure("SET_AMBIENT_LIGHT_001", f"unknown color; one of {', '.join(COLORS)}")
    ctx.set(ambient_light="OFF" if not on or lightcolor == "NONE" else lightcolor)
    return {"on": on, "lightcolor": lightcolor}


def climate_temperature(ctx: ToolContext, temperature: float, seat_zone: str) -> dict[str, Any]:
    if seat_zone not in ZONES:
        raise ToolFailure("SET_CLIMATE_TEMPERATURE_002", f"unknown seat zone; one of {', '.join(ZONES)}")
    # the state refuses values outside 16-28 in steps of 0.5 (an error observation, as in CAR-bench)
    ctx.set(**{f: temperature for f in _zone_fields(seat_zone, "climate_temperature_{}")})
    return {"temperature": temperature, "seat_zone": seat_zone}


def airflow(ctx: ToolContext, direction: str) -> dict[str, Any]:
    if direction not in AIRFLOW:
        raise ToolFailure("SET_FAN_AIRFLOW_DIRECTION_001", f"unknown direction; one of {', '.join(AIRFLOW)}")
    ctx.set(fan_airflow_direction=direction)
    return {"direction": direction}


def fan_speed(ctx: ToolContext, level: int) -> dict[str, Any]:
    if not 0 <= level <= 5:
        raise ToolFailure("SET_FAN_SPEED_001", "level must lie between 0 and 5")
    ctx.set(fan_speed=level)
    return {"level": level}


def _switch(field: str):
    def handler(ctx: ToolContext, on: bool) -> dict[str, Any]:
        ctx.set(**{field: on})
        return {"on": on}
    return handler


def reading_light(ctx: ToolContext, position: Any, on: bool) -> dict[str, Any]:
    if isinstance(position, list):
        raise ToolFailure("SET_READING_LIGHT_001", "one light (or ALL) per call; use parallel calls for several")
    if position not in WINDOWS:
        raise ToolFailure("SET_READING_LIGHT_002", f"unknown position; one of {', '.join(WINDOWS)}")
    ctx.set(**{f: on for f in _seat_fields(position, "reading_light_{}")})
    return {"position": position}


def seat_heating(ctx: ToolContext, level: int, seat_zone: str) -> dict[str, Any]:
    if not 0 <= level <= 3:
        raise ToolFailure("SET_SEAT_HEATING_001", "level must lie between 0 and 3")
    if seat_zone not in ZONES:
        raise ToolFailure("SET_SEAT_HEATING_002", f"unknown seat zone; one of {', '.join(ZONES)}")
    ctx.set(**{f: level for f in _zone_fields(seat_zone, "seat_heating_{}")})
    return {"level": level, "seat_zone": seat_zone}


def steering_wheel_heating(ctx: ToolContext, level: int) -> dict[str, Any]:
    if not 0 <= level <= 3:
        raise ToolFailure("SET_STEERING_WHEEL_HEATING_001", "level must lie between 0 and 3")
    ctx.set(steering_wheel_heating=level)
    return {"level": level}


def defrost(ctx: ToolContext, on: bool, defrost_window: str) -> dict[str, Any]:
    fields = {"ALL": ("window_front_defrost", "window_rear_defrost"), "FRONT": ("window_front_defrost",),
              "REAR": ("window_rear_defrost",)}.get(defrost_window)
    if fields is None:
        raise ToolFailure("SET_WINDOW_DEFROST_001", "defrost_window must be ALL, FRONT or REAR")
    ctx.set(**{f: on for f in fields})
    return {"on": on, "defrost_window": defrost_window}


# ------------------------------------------------------------ getters
def _reader(*fields: str, note: str = ""):
    def handler(ctx: ToolContext) -> dict[str, Any]:
        out: dict[str, Any] = {"description": note} if note else {}
        out.update({f: getattr(ctx.state, f) for f in fields})
        return out
    return handler


def car_color(ctx: ToolContext) -> dict[str, Any]:
    return {"car_color": ctx.fixed.car_color}


def seats(ctx: ToolContext) -> dict[str, Any]:
    return {"seats_occupied": dict(ctx.fixed.seats_occupied)}


def inside_temperature(ctx: ToolContext) -> dict[str, Any]:
    s = ctx.state
    return {"climate_temperature_driver": s.climate_temperature_driver,
            "climate_temperature_passenger": s.climate_temperature_passenger, "temperature_unit": "Celsius"}


_PCT = integer("Opening in percent: 0 is closed, 100 fully open.", 0, 100)
_ON = boolean("true switches it on, false switches it off.")
_SET = "Vehicle control: "
_GET = "Vehicle status: "

TOOLS = [
    CarTool("open_close_sunroof", "write", "vehicle", _SET + "move the sunroof to an opening percentage.",
            params({"percentage": _PCT}, ("percentage",)), sunroof),
    CarTool("open_close_sunshade", "write", "vehicle", _SET + "move the sunshade to an opening percentage.",
            params({"percentage": _PCT}, ("percentage",)), sunshade),
    CarTool("open_close_trunk_door", "write", "vehicle", _SET + "open or close the trunk lid.",
            params({"action": enum("What to do with the trunk.", ("OPEN", "CLOSE"))}, ("action",)), trunk,
            confirm=True),
    CarTool("open_close_window", "write", "vehicle", _SET + "move one window, or all of them, to a percentage.",
            params({"window": enum("Which window (ALL for every window).", WINDOWS), "percentage": _PCT},
                   ("window", "percentage")), window),
    CarTool("set_air_circulation", "write", "vehicle", _SET + "choose how the cabin air circulates.",
            params({"mode": enum("Circulation mode.", CIRCULATION)}, ("mode",)), air_circulation),
    CarTool("set_air_conditioning", "write", "vehicle", _SET + "switch the air conditioning.",
            params({"on": _ON}, ("on",)), air_conditioning),
    CarTool("set_ambient_lights", "write", "vehicle", _SET + "switch the ambient lighting and pick its color.",
            params({"on": _ON, "lightcolor": enum("Color (NONE switches the light off).", COLORS)},
                   ("on", "lightcolor")), ambient_lights),
    CarTool("set_climate_temperature", "write", "vehicle", _SET + "set the target cabin temperature of a zone.",
            params({"temperature": integer("Degrees Celsius.", 16, 28, 0.5),
                    "seat_zone": enum("Which climate zone.", ZONES)}, ("temperature", "seat_zone")),
            climate_temperature),
    CarTool("set_fan_airflow_direction", "write", "vehicle", _SET + "direct the fan's airflow.",
            params({"direction": enum("Where the air goes.", AIRFLOW)}, ("direction",)), airflow),
    CarTool("set_fan_speed", "write", "vehicle", _SET + "set the climate fan's level.",
            params({"level": integer("Fan level, 0 is off.", 0, 5)}, ("level",)), fan_speed),
    CarTool("set_fog_lights", "write", "vehicle", _SET + "switch the fog lights.",
            params({"on": _ON}, ("on",)), _switch("fog_lights")),
    CarTool("set_head_lights_high_beams", "write", "vehicle", _SET + "switch the high beams.",
            params({"on": _ON}, ("on",)), _switch("head_lights_high_beams"), confirm=True),
    CarTool("set_head_lights_low_beams", "write", "vehicle", _SET + "switch the low beams.",
            params({"on": _ON}, ("on",)), _switch("head_lights_low_beams")),
    CarTool("set_reading_light", "write", "vehicle", _SET + "switch one reading light, or all of them.",
            params({"position": enum("Which seat's light (ALL for every light).", WINDOWS), "on": _ON},
                   ("position", "on")), reading_light),
    CarTool("set_seat_heating", "write", "vehicle", _SET + "set the seat heating of a zone.",
            params({"level": integer("Heating level, 0 is off.", 0, 3), "seat_zone": enum("Which seats.", ZONES)},
                   ("level", "seat_zone")), seat_heating),
    CarTool("set_steering_wheel_heating", "write", "vehicle", _SET + "set the steering wheel heating.",
            params({"level": integer("Heating level, 0 is off.", 0, 3)}, ("level",)), steering_wheel_heating),
    CarTool("set_window_defrost", "write", "vehicle", _SET + "switch the defrost of the front, rear or all windows.",
            params({"on": _ON, "defrost_window": enum("Which windows.", ("ALL", "FRONT", "REAR"))},
                   ("on", "defrost_window")), defrost),
    CarTool("get_ambient_light_status_and_color", "read", "vehicle", _GET + "the ambient light's color (OFF if off).",
            params(), _reader("ambient_light")),
    CarTool("get_car_color", "read", "vehicle", _GET + "the car's paint color.", params(), car_color),
    CarTool("get_climate_settings", "read", "vehicle",
            _GET + "fan level and direction, air conditioning, circulation and defrost.", params(),
            _reader("fan_speed", "fan_airflow_direction", "air_conditioning", "air_circulation",
                    "window_front_defrost", "window_rear_defrost")),
    CarTool("get_exterior_lights_status", "read", "vehicle", _GET + "fog lights, low and high beams.", params(),
            _reader("fog_lights", "head_lights_low_beams", "head_lights_high_beams")),
    CarTool("get_reading_lights_status", "read", "vehicle", _GET + "each reading light.", params(),
            _reader("reading_light_driver", "reading_light_passenger", "reading_light_driver_rear",
                    "reading_light_passenger_rear")),
    CarTool("get_seat_heating_level", "read", "vehicle", _GET + "the seat heating levels.", params(),
            _reader("seat_heating_driver", "seat_heating_passenger")),
    CarTool("get_seats_occupancy", "read", "vehicle", _GET + "which seats are occupied.", params(), seats),
    CarTool("get_steering_wheel_heating_level", "read", "vehicle", _GET + "the steering wheel heating level.",
            params(), _reader("steering_wheel_heating")),
    CarTool("get_sunroof_and_sunshade_position", "read", "vehicle", _GET + "sunroof and sunshade openings.",
            params(), _reader("sunroof_position", "sunshade_position", note="openings in percent, 0 is closed")),
    CarTool("get_temperature_inside_car", "read", "vehicle", _GET + "the target temperature of each zone.",
            params(), inside_temperature),
    CarTool("get_trunk_door_position", "read", "vehicle", _GET + "the trunk lid.", params(),
            _reader("trunk_door_position")),
    CarTool("get_vehicle_window_positions", "read", "vehicle", _GET + "each window's opening.", params(),
            _reader("window_driver_position", "window_passenger_position", "window_driver_rear_position",
                    "window_passenger_rear_position", note="openings in percent, 0 is closed")),
]
