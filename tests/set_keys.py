# set_keys.py: writes a network file with keys set as `dltrain --set` sets
# them, so that test_first_run.sh can compare --set with the file itself.
#   python3 set_keys.py BASE OUT KEY=VALUE...
# KEY is a path of keys joined by '.', in a list the item with that name;
# VALUE is YAML.  Uses PyYAML (Debian's python3-yaml), not dltrain's reader.
import sys
import yaml

base, out, sets = sys.argv[1], sys.argv[2], sys.argv[3:]
doc = yaml.safe_load(open(base))
for kv in sets:
    key, value = kv.split("=", 1)
    node, parts = doc, key.split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            found = [item for item in node if isinstance(item, dict) and item.get("name") == part]
            if last:
                raise SystemExit("set_keys.py: a list item cannot be replaced: " + key)
            node = found[0]
        elif last:
            node[part] = yaml.safe_load(value)
        else:
            if part == "loss" and isinstance(node.get(part), str):
                node[part] = {"type": node[part]}
            node = node.setdefault(part, {})
yaml.safe_dump(doc, open(out, "w"), default_flow_style=None, sort_keys=False)
