# data-mining flow sizes (VL2, Greenberg et al., SIGCOMM 2009), as published.
# BYTES CDF
0 0
180 .1
216 .2
560 .3
900 .4
1100 .5
1870 .6
3160 .7
10000 .8
400000 .9
3160000 .95
100000000 .98
1000000000 1
