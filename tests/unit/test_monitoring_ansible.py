"""The grafana role's logic, without Grafana: password handling, loopback binding, skipping.

Acceptance (d): the provisioned admin password is generated on the machine,
never the default, readable by root only, and not stored in the repository.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "ansible" / "roles" / "grafana"


def _tasks(name: str) -> list[dict]:
    return yaml.safe_load((ROLE / "tasks" / name).read_text())


def _defaults() -> dict:
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())


def _render(template: str) -> str:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    variables = dict(_defaults())
    # defaults refer to each other; render them until they are plain values
    for _ in range(3):
        variables = {k: env.from_string(v).render(**variables) if isinstance(v, str) else v
                     for k, v in variables.items()}
    return env.from_string((ROLE / "templates" / template).read_text()).render(
        ansible_managed="managed", **variables)


def _flat(tasks: list[dict]) -> list[dict]:
    out = []
    for task in tasks:
        out.append(task)
        out += _flat(task.get("block", []))
    return out


def _task(name_part: str) -> dict:
    tasks = _flat(_tasks("main.yml") + _tasks("grafana.yml"))
    (task,) = [t for t in tasks if name_part in t.get("name", "")]
    return task


def test_password_is_generated_on_the_machine_once_and_root_only():
    task = _task("Generate the Grafana admin password")
    copy = task["ansible.builtin.copy"]
    assert "lookup('ansible.builtin.password', '/dev/null'" in copy["content"]
    assert _defaults()["mcclab_grafana_password_length"] >= 20
    assert (copy["owner"], copy["group"], copy["mode"]) == ("root", "root", "0600")
    assert copy["force"] is False  # later runs keep it
    assert task["no_log"] is True
    path = _defaults()["mcclab_grafana_password_file"]
    assert path.startswith("{{ mcclab_etc }}/") and _defaults()["mcclab_etc"] == "/etc/mcclab"


def test_password_never_reaches_a_file_grafana_or_the_repository_can_read():
    ini = _render("grafana.ini.j2")
    assert "admin_password" not in ini
    dropin = _render("grafana-server-mcclab.conf.j2")
    assert "LoadCredential=admin_password:/etc/mcclab/grafana-admin-password" in dropin
    assert "GF_SECURITY_ADMIN_PASSWORD__FILE=%d/admin_password" in dropin
    # No file of the checkout holds a Grafana password (nor the default admin/admin).
    files = [p for d in ("ansible", "dashboards", "mcclab/monitoring")
             for p in (REPO / d).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    for path in files:
        text = path.read_text(errors="replace")
        assert "admin_password =" not in text and "GF_SECURITY_ADMIN_PASSWORD=" not in text, path
    for task in _flat(_tasks("grafana.yml")):
        if "block" not in task and "b64decode" in str(task) and "password" in str(task):
            assert task.get("no_log") is True, task["name"]


def test_admin_admin_is_checked_to_be_refused():
    check = _task("Check that admin/admin is refused")["ansible.builtin.uri"]
    assert (check["user"], check["password"], check["status_code"]) == ("admin", "admin", 401)
    reset = _task("Set the generated admin password")
    assert reset["when"] == "mcclab_grafana_login.status == 401"
    assert "--password-from-stdin" in reset["ansible.builtin.command"]["cmd"]


def test_grafana_and_prometheus_listen_on_loopback_only():
    ini = _render("grafana.ini.j2")
    assert "http_addr = 127.0.0.1" in ini and "http_port = 3000" in ini
    assert "allow_sign_up = false" in ini
    assert "[auth.anonymous]\nenabled = false" in ini
    unit = _render("mcclab-prometheus.service.j2")
    assert "--web.listen-address=127.0.0.1:9090" in unit
    assert "--storage.tsdb.retention.time=30d" in unit
    source = yaml.safe_load(_render("datasource.yaml.j2"))["datasources"][0]
    assert source["url"] == "http://127.0.0.1:9090" and source["uid"] == "mcclab-prometheus"
    assert source["jsonData"]["timeInterval"] == "1s"


def test_markers_tell_mcclab_where_things_are():
    import json

    assert json.loads(_render("grafana.json.j2"))["url"] == "http://127.0.0.1:3000"
    prom = json.loads(_render("prometheus.json.j2"))
    assert prom == {"url": "http://127.0.0.1:9090",
                    "targets_dir": "/var/lib/mcclab/prometheus/targets"}


def test_unreachable_repository_skips_grafana_with_a_message():
    env = jinja2.Environment()
    decide = _task("Decide whether to provision Grafana")["ansible.builtin.set_fact"]
    active = decide["mcclab_grafana_active"].replace("| bool", "")
    for status, installed, expected in ((-1, False, False), (200, False, True),
                                        (-1, True, True)):
        value = env.from_string(active).render(
            mcclab_grafana_enabled=True, mcclab_grafana_reach={"status": status},
            mcclab_grafana_binary={"stat": {"exists": installed}}).strip()
        assert value == str(expected), (status, installed)
    report = _task("Report that Grafana is skipped")
    assert report["when"] == "not (mcclab_grafana_active | bool)"
    assert "cannot be reached" in report["ansible.builtin.debug"]["msg"]
    include = _task("Install and provision Grafana")
    assert include["when"] == "mcclab_grafana_active | bool"


def test_site_enables_the_role_after_services():
    site = yaml.safe_load((REPO / "ansible" / "site.yml").read_text())
    roles = [r["role"] for r in site[0]["roles"]]
    assert roles.index("grafana") > roles.index("services")
