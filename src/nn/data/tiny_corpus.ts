/**
 * A small original English text (about 13 KB, 56 distinct characters)
 * written for this project, used to train the tiny character-level GPT in
 * the demo and tests. It is free of third-party copyright.
 *
 * @module
 */

/**
 * The training text: short stories about a town whose bakers work along a
 * conveyor belt.
 *
 * @example
 * ```ts
 * import { CharTokenizer, TINY_CORPUS } from "@conveyor/core/data";
 * const tok = CharTokenizer.fromText(TINY_CORPUS);
 * console.log(TINY_CORPUS.length, tok.vocabSize); // 13051 56
 * ```
 */
export const TINY_CORPUS: string = `The Conveyor Town

There was once a town built along a slow river, and in the middle of the town stood a long hall with a moving belt. Every morning the belt began to turn before the sun came up, and every evening it stopped after the last lamp was lit. The people of the town called it the conveyor, and they set their days by it the way other towns set their days by a bell.

At the first station of the belt worked a baker named Ada. She shaped the dough into small round loaves and placed them on the belt, one after another, never waiting for the loaf before to reach the end. At the second station worked Ben, who brushed each loaf with milk and sprinkled it with seeds. At the third station worked Cora, who watched the oven. At the fourth station worked Dan, who wrapped the bread in paper and tied it with string. When a loaf reached the end of the hall, it was ready to be carried to the market.

In the early days the bakers did not work this way. Ada made a whole loaf, then brushed it, then baked it, then wrapped it, and only then began the next. Ben and Cora and Dan did the same at their own tables. The work was honest, but it was slow, and the ovens stood cold for much of the morning. One winter the miller came to visit and said, "Your ovens are idle more than they are warm. Why not pass the bread from hand to hand, so that each of you does one thing and does it all day?"

So they built the belt. On the first morning Ada shaped the first loaf and set it down. Ben had nothing to do until it reached him, and Cora had nothing to do until it reached her, and Dan stood with his string and his paper and waited the longest of all. The miller laughed and said, "That is the bubble. The belt must fill before everyone is busy, and it must empty before everyone can rest. The more loaves you make in one morning, the smaller the bubble seems."

The bakers learned that the miller was right. On a day with only four loaves, Dan waited almost as long as he worked. On a day with forty loaves, the waiting at the start and the end was only a small part of the morning. They learned also that the belt moves only as fast as its slowest station. When Cora's oven was too small, loaves piled up in front of her while Dan stood idle at the end. So they gave Cora a second oven, and they moved the seeds from Ben to Ada, and the belt ran evenly again.

Years later a young clerk named Eli came to the hall with a notebook. He wrote down how long each station took, and he drew the work as rows of little boxes, one row for each baker and one box for each loaf. Where a box was missing, there was a gap, and he shaded the gaps in grey. "If we could fill the grey," he said, "we could bake the same bread in less time." The bakers told him that the grey at the start could not be filled, because the first loaf must pass every station before the last station has any work.

Eli thought about this for a long time. Then he noticed something about the way the bakers checked their bread. After a loaf was sold, the customers sent back notes: too much salt, too little seed, baked too long. These notes travelled back along the belt, from Dan to Cora to Ben to Ada, and each baker used them twice. First each baker told the baker before them what to change. Then each baker adjusted their own hands and their own habits. Eli saw that the first part was urgent, because the baker before was waiting for it, but the second part could wait. A baker could adjust their own habits later, in a quiet moment, when no loaf was in front of them.

"Split the work in two," said Eli. "Pass the notes back at once, and keep your own lessons for the grey boxes." The bakers tried it. When a gap appeared, they filled it with the lessons they had saved. The grey shrank. On long mornings it almost vanished. Eli wrote in his notebook that the rule was simple: do at once what someone else is waiting for, and save for later what only you need.

The Lantern Keeper

On the hill above the river lived a lantern keeper named Fern. Each evening she climbed the tower and lit the great lamp, and each morning she climbed again and put it out. Between those two climbs she kept a small garden, and she kept a book in which she wrote the weather, the colour of the sky, and the number of boats that passed.

Fern liked numbers because they did not argue. If she counted nine boats, there had been nine boats, whatever anyone said at the market. But she also knew that numbers could be careless. Once she counted the same boat twice because it turned around in the fog. Once she missed a boat because she was watering the beans. So she learned to write down not only the count but also how sure she was, and she learned to check her count against the harbour master, who kept his own book.

When the two books agreed, she felt calm. When they did not agree, she did not guess. She walked down the hill and asked. Usually the mistake was small and easy to find: a boat written on the wrong day, a number smudged by rain. Sometimes the mistake was hers and sometimes it was his, and they did not mind which. What mattered was that the books agreed before either of them used the numbers for anything important.

The harbour master once asked her why she cared so much about a boat or two. Fern said, "Because next year someone will plan the size of the new dock from these books. If the books are wrong by a little every day, the dock will be wrong by a lot. A small error that is checked is harmless. A small error that is trusted grows."

The Two Gardeners

Two gardeners shared a long field. The first gardener planted every seed on the first day, watered every row on the second day, and weeded every row on the third day. The second gardener planted one row, watered it, weeded it, and then moved to the next. At the end of the season both gardens were full of beans, but the second gardener had needed only one watering can and one small basket of seed at a time, while the first had needed a cart.

The first gardener said, "My way is simpler. I do one kind of work all day and I never have to change my tools." The second gardener said, "My way is lighter. I never carry more than one row of seed." Both were right. The first way used more room and fewer changes of tools. The second way used less room and more changes. A wise gardener chooses between them by asking which is scarce this year: room in the shed, or time in the day.

In a dry year they found a third way. The second gardener did not keep every sprout she pulled while weeding. She kept only one sprout from every few rows, and when she needed to know how a row had grown, she planted that one sprout again and watched it. It cost her a little more work, but her shed was nearly empty, and she could tend a field twice as long as before. The first gardener called it wasteful. The second gardener called it checkpointing, because she had read the word in a book about clocks, and she liked the sound of it.

Notes on Counting

A count of zero is still a count. A list with no items is still a list, and it is not the same as no list at all. When a clerk is asked for the loaves baked on a holiday, the right answer is zero, not silence. When a clerk is asked for the loaves baked on a day that has not happened yet, the right answer is that the question has no answer, and the clerk should say so plainly, naming the day.

Good clerks say what went wrong and why. A note that says "bad number" helps no one. A note that says "the number of ovens must be at least one, but the order asked for zero" tells the reader what to fix. A note that says "row seven has five columns but the table needs four" saves an hour of searching. The best notes name the value that was wrong and the rule it broke.

Good clerks also refuse early. If an order cannot be filled, it is better to say so before the dough is mixed than after the bread is half baked. A half baked loaf helps no one and must be thrown away. So the clerks of the conveyor town checked every order at the door: the number of loaves, the kind of flour, the time of delivery. Only when every part was sound did they pass the order to Ada.

The River

The river was slow, but it never stopped. In spring it rose and carried branches from the hills. In summer it shrank and showed its stones. In autumn it turned brown with leaves, and in winter the edges froze while the middle kept moving. Children threw sticks from the bridge and ran to the other side to see whose stick came out first. The sticks that took the middle of the river always won, because the water there moved fastest and met nothing in its way.

The old ferryman said that the river taught him patience. He could not make it faster, and he could not make it slower. He could only choose when to cast off and where to steer. On a good day he crossed forty times. On a bad day, with wind against the current, he crossed twenty. He did not complain about the bad days. He said they made the good days easy to recognise.

When the belt in the long hall was built, the ferryman came to see it. He watched the loaves move from station to station, and he nodded. "It is a river of bread," he said. "Each baker is a bend in the river. If one bend is narrow, the whole river backs up behind it. Widen the narrow bend and the river runs again." The bakers laughed, but they remembered it, and when the belt slowed they looked first for the narrow bend.

A Small Lesson in Patience

Learning is slow at first. A child learning letters sees only shapes, and every shape looks strange. After a while the shapes become familiar, and the child begins to guess which letter will come next. The guesses are poor at first, then better, then good. A child who has read many pages knows that after the letter q there is almost always a u, that a sentence often ends with a full stop, and that the word the appears more often than any other.

A machine that learns to read one letter at a time begins in the same way. At the start it knows nothing, and it guesses every letter with equal chance. Its surprise at each letter is large. As it reads the same pages again and again, it notices that some letters are common and some are rare, that spaces come between words, and that certain letters like to follow others. Its surprise grows smaller. It will never know exactly what comes next, but it learns to be surprised less often, and that is what learning means for such a machine.

The bakers of the conveyor town would have understood this. The first loaves Ada made were uneven and too dark. Each morning the notes came back, and each morning she changed her hands a little. After a season her loaves were round and golden, and the notes were few. She did not become perfect. She became less wrong, one morning at a time.

The Market

On market days the square filled with carts and voices. The bread from the long hall arrived in baskets, still warm, and the first customers were always the same: the schoolteacher, who bought two loaves; the blacksmith, who bought four; and the lantern keeper, who bought one and a jar of honey. After them came everyone else, and by noon the baskets were empty.

The schoolteacher used the bread in her lessons. She cut a loaf into eight slices and asked the children how many slices each would get if four children shared them. Then she cut another loaf into slices of different sizes and asked the harder question: if the slices are not equal, how do we make sure everyone gets a fair share of the whole loaf? The children argued for a long time. At last a quiet girl said, "Weigh each slice, and give each child the part of the whole that their slice holds. Then the parts add up to one loaf, whatever the sizes." The teacher wrote that on the board, and it stayed there all year.

The blacksmith used his bread to feed his apprentices, who worked in pairs. One apprentice heated the iron and the other struck it, and they traded places every hour. The blacksmith said that two apprentices who trade places learn twice as much as two who never do, because each learns what the other needs. He also said that a hammer should never wait for the iron, and the iron should never wait for the hammer. When both were ready at the same moment, the work rang like a song.

Evening

When the last lamp was lit, the belt in the long hall slowed and stopped. Ada washed her hands and hung up her apron. Ben swept the seeds from the floor. Cora let the ovens cool. Dan counted the string that was left and wrote the number on the wall. Eli closed his notebook and walked home along the river, past the ferry and up the hill, where Fern was climbing the tower with her lamp.

Tomorrow the belt would turn again. The loaves would move from hand to hand, the notes would travel back, and the grey boxes in Eli's notebook would be a little smaller than the day before. Nobody in the town thought this was remarkable. It was simply how the work was done: each person doing one thing well, passing it on without delay, and saving the quiet lessons for the quiet moments.
`;
