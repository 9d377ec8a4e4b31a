"""`cg-ray keys create|revoke|list`: API keys of the service, in its database."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from cg_ray.errors import ConfigError


def _settings(args: argparse.Namespace) -> Any:
    import yaml

    from cg_ray.serve.settings import ServiceSettings

    if args.database_url or args.data_dir:
        return ServiceSettings(data_dir=args.data_dir or Path("serve_data"), database_url=args.database_url)
    try:
        config = yaml.safe_load(Path(args.config).read_text())
        app = next(a for a in config["applications"] if a["import_path"].startswith("cg_ray.serve.app"))
    except (OSError, KeyError, StopIteration, TypeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{args.config}: no cg_ray application found ({exc})") from None
    wanted = {k: v for k, v in app.get("args", {}).items() if k in ("data_dir", "database_url")}
    return ServiceSettings(**wanted)


def _cmd_keys(args: argparse.Namespace) -> int:
    from cg_ray.serve.db import Store
    from cg_ray.serve.keys import create_key, list_keys, revoke_key

    store = Store(_settings(args).db_url)
    if args.action == "create":
        key_id, key = create_key(store, args.name)
        print(f"created {key_id} ({args.name}). The key, shown once:\n{key}")
    elif args.action == "revoke":
        revoke_key(store, args.key_id)
        print(f"revoked {args.key_id}")
    else:
        print(json.dumps(list_keys(store), indent=2))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("keys", help="manage the REST service's API keys")
    p.add_argument("--config", default="serve_config.yaml", help="serve config whose database to use")
    p.add_argument("--data-dir", type=Path, default=None, help="instead of --config: the service's data_dir")
    p.add_argument("--database-url", default=None, help="instead of --config: a SQLAlchemy URL")
    actions = p.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="create a key (printed once; only its hash is stored)")
    create.add_argument("--name", required=True, help="who the key is for")
    revoke = actions.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("key_id")
    actions.add_parser("list", help="list keys (ids and names, never the keys)")
    p.set_defaults(handler=_cmd_keys)
