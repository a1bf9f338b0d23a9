#!/usr/bin/env python3
"""Where the core's instructions go in the `core` case of benches/instructions.rs
(the core's inbound entry and exit in a handler), by part. Needs valgrind and
binutils (objdump, addr2line). Run from the workspace root:

    cargo bench -p sentinel-flow-tower --bench instructions --no-run
    python3 sentinel-tower/benches/tools/core_parts.py

Instructions per request: (run at 20 000 - run at 10 000) / 10 000, per address;
each address is put in a part by the chain of functions inlined at it
(`addr2line -i`) and the function it is in; `the rest` is `core` less `baseline`
less the parts."""
import collections
import glob
import os
import re
import subprocess
import sys
import tempfile

binary = max(
    (p for p in glob.glob('target/release/deps/instructions-*') if not p.endswith('.d')),
    key=os.path.getmtime,
)

def per_address(case):
    """Instructions per request of `case`, per address, set-up cancelled."""
    runs = []
    for n in (10_000, 20_000):
        with tempfile.NamedTemporaryFile(suffix='.out') as out:
            subprocess.run(['valgrind', '--tool=callgrind', '--dump-instr=yes',
                            '--compress-pos=no', '--compress-strings=no',
                            f'--callgrind-out-file={out.name}', binary, case, str(n)],
                           check=True, capture_output=True)
            costs = collections.Counter()
            skip = False
            for line in open(out.name):
                if line.startswith('calls='):
                    skip = True  # the next line is the call's inclusive cost
                    continue
                if skip:
                    skip = False
                    continue
                if line.startswith('0x'):
                    fields = line.split()
                    costs[int(fields[0], 16)] += int(fields[-1])
            runs.append(costs)
    return {a: (runs[1][a] - runs[0][a]) / 10_000 for a in set(runs[0]) | set(runs[1])}

def function_of():
    table = {}
    name = ''
    dump = subprocess.run(['objdump', '-d', '--no-show-raw-insn', '-C', binary],
                          check=True, capture_output=True, text=True).stdout
    for line in dump.splitlines():
        m = re.match(r'^[0-9a-f]+ <(.*)>:$', line)
        if m:
            name = m.group(1)
            continue
        m = re.match(r'^\s+([0-9a-f]+):', line)
        if m:
            table[int(m.group(1), 16)] = name
    return table

PARTS = [
    ('counting at exit (RT, success, min RT; resource and inbound total)', lambda chain, fn: 'StatisticSlot::exit' in chain),
    ('counting at entry (the pass on both)', lambda chain, fn: 'count_pass' in chain),
    ("the flow rule's check (a quota lease)", lambda chain, fn: fn.startswith('sentinel_flow_core::flow::check')),
    ("the rule checks' dispatch (StatisticSlot::check)", lambda chain, fn: fn.startswith('sentinel_flow_core::slot::statistic::StatisticSlot::check')),
    ("the rule set's load", lambda chain, fn: 'with_rules' in chain),
    ('the clock, at entry and at exit', lambda chain, fn: 'now_ms' in chain or 'now_ms' in fn),
]

def main():
    core = per_address('core')
    base_total = sum(per_address('baseline').values())
    functions = function_of()
    sampled = [a for a, c in core.items() if abs(c) >= 0.5]
    chains = subprocess.run(['addr2line', '-i', '-f', '-C', '-a', '-e', binary]
                            + [hex(a) for a in sampled],
                            check=True, capture_output=True, text=True).stdout
    chain_of = {}
    current = None
    for line in chains.splitlines():
        if line.startswith('0x'):
            current = int(line, 16)
            chain_of[current] = ''
        elif current is not None:
            chain_of[current] += line + '\n'
    parts = collections.Counter()
    for address in sampled:
        for name, test in PARTS:
            if test(chain_of.get(address, ''), functions.get(address, '')):
                parts[name] += core[address]
                break
    overhead = sum(core.values()) - base_total
    for name, _ in PARTS:
        print(f'{parts[name]:7.0f}  {name}')
    print(f'{overhead - sum(parts.values()):7.0f}  the rest (the guard, the chain\'s exit, the handler)')
    print(f'{overhead:7.0f}  core less baseline')

if __name__ == '__main__':
    sys.exit(main())
