from util import *
import bisect
def r512(x): return (x+511)//512*512
class PoolWalk:
    """walk trace; maintain segments and live blocks (address->rounded size) to answer free-in-pool queries"""
    def __init__(self, d, dev):
        self.r = Replay(d, dev); self.T = self.r.T
    def states(self, want):
        """yield (i, segs{addr:size}, live{addr:(size)}) right BEFORE event i for i in want"""
        r=self.r; T=self.T; want=set(want)
        # initial segments
        seg0 = {s["address"]: s["total_size"] for s in r.segs}
        for e in reversed(T):
            if e["action"]=="segment_alloc": seg0.pop(e["addr"],None)
            elif e["action"]=="segment_free": seg0[e["addr"]]=e["size"]
        segs=dict(seg0); live={a:r512(sz) for a,(sz,fr) in r.ghosts.items()}
        for i,e in enumerate(T):
            if i in want: yield i, segs, live
            a=e['action']
            if a=='alloc': live[e['addr']]=r512(e['size'])
            elif a=='free_requested': live.pop(e['addr'],None)
            elif a=='segment_alloc': segs[e['addr']]=e['size']
            elif a=='segment_free': segs.pop(e['addr'],None)
def seg_free(segs, live):
    sa=sorted(segs); out={s:segs[s] for s in sa}
    for a,sz in live.items():
        k=bisect.bisect_right(sa,a)-1
        if k>=0 and a < sa[k]+segs[sa[k]]: out[sa[k]]-=sz
    return out
def is_small(sz): return sz==2*MiB
