"""run.sh's two helpers for a ctest run.

  summary.py filter GTEST_FILTER     ctest's -R/-E arguments (one a line) selecting the tests a
                                     gtest filter selects ('Pos1:Pos2-Neg1:Neg2', * and ?)
  summary.py summary JUNIT JSON      one line per executable, 'NAME rc=… passed=… failed=…
                                     skipped=…', from ctest's --output-junit file and its
                                     --show-only=json-v1 listing (which names each test's command)
"""
import json
import os
import re
import sys
import xml.etree.ElementTree as ET


def regex(patterns):
    def one(p):
        return ''.join('.*' if c == '*' else '.' if c == '?' else re.escape(c) for c in p)
    return '^(' + '|'.join(one(p) for p in patterns) + ')$'


def filter_args(f):
    pos, _, neg = f.partition('-')
    args = []
    pos = [p for p in pos.split(':') if p]
    neg = [p for p in neg.split(':') if p]
    if pos:
        args += ['-R', regex(pos)]
    if neg:
        args += ['-E', regex(neg)]
    return args


def summary(junit, listing):
    exe_of = {}
    for t in json.load(open(listing))['tests']:
        if t.get('command'):
            exe_of[t['name']] = os.path.basename(t['command'][0])
    rows = {}
    for case in ET.parse(junit).getroot().iter('testcase'):
        name = case.get('name')
        exe = exe_of.get(name, name)
        row = rows.setdefault(exe, {'passed': 0, 'failed': 0, 'skipped': 0})
        status = case.get('status', 'run')
        if case.find('failure') is not None or status == 'fail':
            row['failed'] += 1
        elif case.find('skipped') is not None or status in ('notrun', 'disabled'):
            row['skipped'] += 1
        else:
            row['passed'] += 1
    for exe in sorted(rows):
        r = rows[exe]
        rc = 1 if r['failed'] else 0
        print(f"{exe} rc={rc} passed={r['passed']} failed={r['failed']} skipped={r['skipped']}")


if __name__ == '__main__':
    if sys.argv[1] == 'filter':
        print('\n'.join(filter_args(sys.argv[2])))
    else:
        summary(sys.argv[2], sys.argv[3])
