import pickle, sys, os, glob
sys.path.insert(0, os.path.dirname(__file__))
from replay import Replay
D = '/work/checkset/synth38'
GiB = 2**30; MiB = 2**20
def load(stem):
    f = glob.glob(D + '/' + stem + '*')[0]
    return pickle.load(open(f, 'rb'))
def fr(e):
    fs = e.get('frames') or []
    return ['%s (%s:%s)' % (f.get('name'), f.get('filename'), f.get('line')) for f in fs]
def pyfr(e):
    fs = e.get('frames') or []
    return [f for f in fs if str(f.get('filename','')).endswith('.py')]
def g(x): return '%.3f GiB' % (x/GiB)
def m(x): return '%.1f MiB' % (x/MiB)
