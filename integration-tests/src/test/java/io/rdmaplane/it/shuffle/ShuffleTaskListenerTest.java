package io.rdmaplane.it.shuffle;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Properties;
import org.apache.spark.scheduler.JobSucceeded$;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.StageInfo;
import org.junit.jupiter.api.Test;
import scala.Option;
import scala.collection.immutable.List$;

/** The job's time outside its stages, from the scheduler's events as Spark posts them. */
class ShuffleTaskListenerTest {
    @Test
    void gapsAreTheJobsTimeOutsideItsStages() {
        ShuffleTaskListener listener = new ShuffleTaskListener();
        // job 0: start 1000, stages 1010-2000 and 2050-3000, end 3020
        job(listener, 0, 1000, 3020, new long[][] {{1010, 2000}, {2050, 3000}});
        // job 1: start 5000, one stage 5100-6000, end 6005
        job(listener, 1, 5000, 6005, new long[][] {{5100, 6000}});

        ShuffleTaskListener.Totals totals = listener.awaitTotals();
        assertEquals(new ShuffleTaskListener.Gaps(10 + 100, 50, 20 + 5, 2020 + 1005), totals.gaps());
        assertEquals(990 + 950 + 900, totals.mapStageMs() + totals.reduceStageMs());
        assertEquals(2020 + 1005 - (110 + 50 + 25), totals.mapStageMs() + totals.reduceStageMs());
    }

    private static void job(ShuffleTaskListener listener, int id, long start, long end, long[][] stages) {
        listener.onJobStart(new SparkListenerJobStart(id, start, List$.MODULE$.empty(), new Properties()));
        for (long[] s : stages) {
            StageInfo stage = new StageInfo(id * 10, 0, "stage", 1, List$.MODULE$.empty(), List$.MODULE$.empty(), "", null,
                    List$.MODULE$.empty(), Option.empty(), 0, false, 0);
            stage.submissionTime_$eq(Option.apply(s[0]));
            stage.completionTime_$eq(Option.apply(s[1]));
            listener.onStageCompleted(new SparkListenerStageCompleted(stage));
        }
        listener.onJobEnd(new SparkListenerJobEnd(id, end, JobSucceeded$.MODULE$));
    }
}
