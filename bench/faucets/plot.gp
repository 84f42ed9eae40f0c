# Plots bench_faucets' data: gnuplot -e "data='bench/results/faucets.dat'; out='docs/img'" bench/faucets/plot.gp
if (!exists("data")) data = 'bench/results/faucets.dat'
if (!exists("out")) out = 'docs/img'
set terminal svg size 720,440 dynamic font "sans,12"
set key top left
set grid
set xlabel "load factor"
set xrange [0.1:1.0]

set output out.'/faucets_response.svg'
set title "Mean response time, 64 processors, mean run time 64.5 s"
set ylabel "mean response time (s)"
set logscale y
plot data using 1:2 with linespoints title "fcfs (rigid)", \
     data using 1:4 with linespoints title "easy (rigid)", \
     data using 1:6 with linespoints title "equipartition (adaptive, linear)", \
     data using 1:8 with linespoints title "equipartition (adaptive, Amdahl 0.95, 2 s resize)"

set output out.'/faucets_utilization.svg'
set title "Processor utilization, 64 processors, mean run time 64.5 s"
set ylabel "utilization (held processor-seconds / capacity)"
unset logscale y
set yrange [0:1.05]
set key bottom right
plot data using 1:3 with linespoints title "fcfs (rigid)", \
     data using 1:5 with linespoints title "easy (rigid)", \
     data using 1:7 with linespoints title "equipartition (adaptive, linear)", \
     data using 1:9 with linespoints title "equipartition (adaptive, Amdahl 0.95, 2 s resize)"
