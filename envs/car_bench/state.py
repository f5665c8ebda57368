"""The car's mutable state and its fixed context, in CAR-bench's field names.

A task's ``context_init_config`` is one flat object that sets both: keys that
name a ``CarState`` field set the mutable state the agent's tools change,
keys that name a ``FixedContext`` field set what no tool can change (battery,
charge, seats, location, date and time, user preferences); other keys are
ignored, as CAR-bench ignores them. Both models validate on assignment, so a
value outside a field's range (a temperature of 30 degrees) is refused the
way CAR-bench's own state refuses it.

``CarState.digest`` is the state hash the reward compares: equal iff every
field is equal (the fixed context is not part of it, as in CAR-bench).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

AMBIENT_COLORS = ("OFF", "RED", "GREEN", "BLUE", "YELLOW", "WHITE", "PINK", "ORANGE", "PURPLE", "CYAN")
AIRFLOW = ("FEET", "HEAD", "HEAD_FEET", "WINDSHIELD", "WINDSHIELD_FEET", "WINDSHIELD_HEAD", "WINDSHIELD_HEAD_FEET")
CIRCULATION = ("AUTO", "FRESH_AIR", "RECIRCULATION")
POI_CATEGORIES = ("airports", "bakery", "fast_food", "parking", "public_toilets", "restaurants", "supermarkets",
                  "charging_stations")

Percent = Field(default=0, ge=0, le=100)
Level3 = Field(default=0, ge=0, le=3)
Celsius = Field(default=20, ge=16, le=28, multiple_of=0.5)


class CarState(BaseModel):
    """What the agent's tools change (CAR-bench's dynamic context)."""

    model_config = ConfigDict(validate_assignment=True, extra="ignore")

    sunroof_position: int = Percent
    sunshade_position: int = Percent
    # CAR-bench stores the trunk's last action ("OPEN" / "CLOSE") here; it starts as "closed"
    trunk_door_position: str = "closed"
    window_driver_position: int = Percent
    window_passenger_position: int = Percent
    window_driver_rear_position: int = Percent
    window_passenger_rear_position: int = Percent
    reading_light_driver: bool = False
    reading_light_passenger: bool = False
    reading_light_driver_rear: bool = False
    reading_light_passenger_rear: bool = False
    fog_lights: bool = False
    head_lights_low_beams: bool = False
    head_lights_high_beams: bool = False
    ambient_light: Literal[AMBIENT_COLORS] = "OFF"  # type: ignore[valid-type]
    climate_temperature_driver: float = Celsius
    climate_temperature_passenger: float = Celsius
    steering_wheel_heating: int = Level3
    seat_heating_driver: int = Level3
    seat_heating_passenger: int = Level3
    fan_speed: int = Field(default=0, ge=0, le=5)
    window_front_defrost: bool = False
    window_rear_defrost: bool = False
    fan_airflow_direction: Literal[AIRFLOW] = "FEET"  # type: ignore[valid-type]
    air_conditioning: bool = False
    air_circulation: Literal[CIRCULATION] = "AUTO"  # type: ignore[valid-type]
    navigation_active: bool = False
    waypoints_id: list[str] = Field(default_factory=list)  # start, intermediate stops, destination
    routes_to_final_destination_id: list[str] = Field(default_factory=list)  # one route per leg
    email_addresses_sent_mail_to: list[str] = Field(default_factory=list)
    phone_numbers_called: list[str] = Field(default_factory=list)

    def digest(self) -> str:
        # floats and ints compare equal in CAR-bench's hash of the model (22 == 22.0): normalise numbers
        data = {k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                for k, v in self.model_dump().items()}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


# the context models ignore keys they do not know, as CAR-bench's own do (a location row may carry "iso2")
class Position(BaseModel):
    model_config = ConfigDict(extra="ignore")
    longitude: float
    latitude: float


class Place(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str
    name: str
    position: Position


class DateTime(BaseModel):
    model_config = ConfigDict(extra="ignore")
    year: int
    month: int
    day: int
    hour: int
    minute: int


class _Prefs(BaseModel):
    model_config = ConfigDict(extra="ignore")


class PoiPreferences(_Prefs):
    airports: list[str] = Field(default_factory=list)
    bakery: list[str] = Field(default_factory=list)
    fast_food: list[str] = Field(default_factory=list)
    parking: list[str] = Field(default_factory=list)
    public_toilets: list[str] = Field(default_factory=list)
    restaurants: list[str] = Field(default_factory=list)
    supermarkets: list[str] = Field(default_factory=list)
    charging_stations: list[str] = Field(default_factory=list)


class RoutingPreferences(_Prefs):
    route_selection: list[str] = Field(default_factory=list)


class VehiclePreferences(_Prefs):
    climate_control: list[str] = Field(default_factory=list)
    vehicle_settings: list[str] = Field(default_factory=list)


class CommunicationPreferences(_Prefs):
    email: list[str] = Field(default_factory=list)
    calendar: list[str] = Field(default_factory=list)


class WeatherPreferences(_Prefs):
    weather: list[str] = Field(default_factory=list)


class UserPreferences(_Prefs):
    points_of_interest: PoiPreferences = Field(default_factory=PoiPreferences)
    navigation_and_routing: RoutingPreferences = Field(default_factory=RoutingPreferences)
    vehicle_settings: VehiclePreferences = Field(default_factory=VehiclePreferences)
    productivity_and_communication: CommunicationPreferences = Field(default_factory=CommunicationPreferences)
    weather: WeatherPreferences = Field(default_factory=WeatherPreferences)


class FixedContext(BaseModel):
    """What no tool changes: the car's specs, charge, seats, location, clock and the learned preferences."""

    model_config = ConfigDict(validate_assignment=True, extra="ignore")

    car_color: str = "blue"
    battery_capacity_kwh: float = Field(default=80, ge=60, le=100)
    useable_battery_percentage: float = Field(default=95, ge=90, le=100)
    max_charging_power_ac: Literal[11, 22] = 11
    max_charging_power_dc: Literal[150, 200, 250, 268, 300, 350, 1000] = 250
    energy_consumption: float = Field(default=15, ge=10, le=20)  # kWh per 100 km
    charging_curve_parameters: dict[str, list[float]] = Field(default_factory=lambda: {
        "soc_tresholds": [5, 10, 20, 50, 70, 80, 90, 95, 100],  # CAR-bench's key, spelling included
        "power_percentages": [60, 90, 100, 100, 100, 90, 70, 40, 20]})
    state_of_charge: float = Field(default=10, ge=10, le=100)
    seats_occupied: dict[str, bool] = Field(default_factory=lambda: {
        "driver": True, "passenger": False, "driver_rear": False, "passenger_rear": False})
    current_location: Place = Field(default_factory=lambda: Place(
        id="loc_mun_9995", name="Munich", position=Position(longitude=11.575, latitude=48.1375)))
    current_datetime: DateTime = Field(default_factory=lambda: DateTime(year=2025, month=2, day=14, hour=12, minute=0))
    user_preferences: UserPreferences = Field(default_factory=UserPreferences)

    @property
    def usable_kwh(self) -> float:
        return self.battery_capacity_kwh * self.useable_battery_percentage / 100


def split_config(config: dict[str, Any]) -> tuple[CarState, FixedContext]:
    """The mutable state and the fixed context a ``context_init_config`` sets."""
    return CarState.model_validate(config), FixedContext.model_validate(config)


class CarInitialState(BaseModel):
    """What an episode starts from: a task's ``context_init_config``, its calendar and what it removed."""

    model_config = ConfigDict(extra="forbid")

    context_init_config: dict[str, Any] = Field(default_factory=dict)
    calendar_id: str = ""
    removed_part: list[str] = Field(default_factory=list)
