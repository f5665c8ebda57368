"""`evosyn new-domain NAME`: a working domain pack, written from the template (flows/domain_template/)."""
from __future__ import annotations

import json
import keyword
import os
from importlib import resources
from pathlib import Path

import click

from evosyn.flows.cli_app import PATH, UserError, main

TEMPLATE = "domain_template"  # a folder of the flows package, copied file by file
FILES = ("__init__.py", "pack.py", "environment.py", "policy.py", "generator.py", "ontology.json")


def write_pack(name: str, folder: Path) -> Path:
    """Write the template as pack ``name`` under ``folder`` (``folder/name/``); returns the pack's folder."""
    target = folder / name
    source = resources.files("evosyn.flows").joinpath(TEMPLATE)
    target.mkdir(parents=True)
    for file in FILES:
        text = source.joinpath(file).read_text()
        if file == "ontology.json":  # the only file that names the domain: the code takes it from the folder
            space = json.loads(text)
            space["domain"] = name
            text = json.dumps(space, indent=2) + "\n"
        (target / file).write_text(text)
    return target


@main.command("new-domain")
@click.argument("name")
@click.option("--dir", "folder", type=PATH, default=None,
              help="The pack folder to write it in (default: the first of EVOSYN_DOMAINS, else ./domains).")
def new_domain(name: str, folder: str | None) -> None:
    """Write a working domain pack NAME from the template: an environment on envs.base.Domain, its tools and
    state, a policy with one rule, ontology.json, a generator and two official tasks. `evosyn synth --domain
    NAME` and `evosyn run --domain NAME` work on it as written; edit it into your own domain from there."""
    from evosyn.envs.packs import USER_FOLDER_DEFAULT, USER_FOLDERS_ENV, known
    from evosyn.flows.inputs import cannot_create

    if not name.isidentifier() or keyword.iskeyword(name) or not name.islower():
        raise UserError(f"new-domain {name}: a domain name is a lower-case Python identifier (e.g. gym_desk)")
    if name in known():
        raise UserError(f"new-domain {name}: a domain of that name exists already; pick another name")
    env = os.environ.get(USER_FOLDERS_ENV)
    base = Path(folder) if folder else Path(next((p for p in (env or "").split(os.pathsep) if p),
                                                 USER_FOLDER_DEFAULT))
    if (base / name).exists():
        raise UserError(f"new-domain {name}: {base / name} exists already; pick another name or --dir")
    why = cannot_create(base)
    if why is not None:
        raise UserError(f"--dir {base}: {why}")
    target = write_pack(name, base)
    click.echo(f"wrote {target}/ ({', '.join(FILES)})")
    found = env is not None and base.resolve() in [Path(p).resolve() for p in env.split(os.pathsep) if p]
    if not found and not (env is None and base.resolve() == Path(USER_FOLDER_DEFAULT).resolve()):
        click.echo(f"note: {base} is not a pack folder yet: export {USER_FOLDERS_ENV}={base.resolve()}")
    click.echo(f"next: evosyn envs check {name}; evosyn synth --domain {name} --n 20; "
               f"evosyn run --domain {name} --rounds 1 --budget 20")
